from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse

from jobs.models import Job


@login_required
def download_ssh_key(request: HttpRequest, username: str, name: str) -> HttpResponse:
    """The job's private SSH key, for its owner only (admins and others get 404)."""
    job = Job.objects.filter(owner_id=request.user.pk, owner__username=username, name=name).first()
    if job is None or not job.ssh_private_key:
        raise Http404("no such key")
    response = HttpResponse(job.ssh_private_key, content_type="application/x-pem-file")
    response["Content-Disposition"] = f'attachment; filename="{job.name}.id_ed25519"'
    response["Cache-Control"] = "no-store"
    return response
