"""Admin pages under /manage/: a virtual cluster's settings, users. Admins only (others: 403).
The lists that show the jobs' use (virtual clusters, nodes) are ``jobs.views.manage``'s."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from clusters import vc_changes
from clusters.forms import NewUserForm, UserAccessForm, VirtualClusterForm
from clusters.models import DefaultVirtualCluster, VirtualCluster


def admin_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("admins only")
        return view(request, *args, **kwargs)

    return wrapper


@admin_only
def vc_edit(request: HttpRequest, name: str | None = None) -> HttpResponse:
    vc = get_object_or_404(VirtualCluster, name=name) if name else None
    form = VirtualClusterForm(request.POST if request.method == "POST" else None, instance=vc)
    if request.method == "POST" and form.is_valid():
        saved = form.save()
        messages.success(request, f"virtual cluster {saved.name} saved")
        return redirect("cluster:manage-vcs")
    return render(request, "clusters/manage_edit.html", {"form": form, "vc": vc})


@admin_only
@require_POST
def vc_delete(request: HttpRequest, name: str) -> HttpResponse:
    vc = get_object_or_404(VirtualCluster, name=name)
    problem = vc_changes.delete(vc)
    if problem:
        messages.error(request, problem)
    else:
        messages.success(request, f"virtual cluster {name} deleted")
    return redirect("cluster:manage-vcs")


@admin_only
def users(request: HttpRequest) -> HttpResponse:
    form = NewUserForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        User.objects.create_user(
            data["username"], password=data["password"], is_staff=data["is_staff"]
        )
        messages.success(
            request,
            f"User {data['username']} created. They may submit to the virtual clusters open to "
            "all; give them others on their page (click their name).",
        )
        return redirect("clusters:manage-users")
    people = User.objects.order_by("username").prefetch_related("virtual_clusters")
    people = people.select_related("default_vc__virtual_cluster")
    return render(request, "clusters/manage_users.html", {"form": form, "people": people})


@admin_only
def user_edit(request: HttpRequest, username: str) -> HttpResponse:
    person = get_object_or_404(User, username=username)
    current = DefaultVirtualCluster.objects.filter(user=person).first()
    initial = {
        "is_staff": person.is_staff,
        "is_active": person.is_active,
        "virtual_clusters": person.virtual_clusters.all(),
        "default_vc": current.virtual_cluster if current else None,
    }
    form = UserAccessForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        if person == request.user and not (data["is_staff"] and data["is_active"]):
            form.add_error(None, "you cannot remove your own admin rights or disable yourself")
        else:
            with transaction.atomic():
                person.is_staff, person.is_active = data["is_staff"], data["is_active"]
                person.save(update_fields=["is_staff", "is_active"])
                person.virtual_clusters.set(data["virtual_clusters"])
                DefaultVirtualCluster.objects.filter(user=person).delete()
                if data["default_vc"] is not None:
                    DefaultVirtualCluster.objects.create(
                        user=person, virtual_cluster=data["default_vc"]
                    )
            messages.success(request, f"user {username} saved")
            return redirect("clusters:manage-users")
    context = {
        "form": form,
        "person": person,
        "directory_sets_admin": bool(settings.DIRECTORY_ADMIN_GROUPS),
    }
    return render(request, "clusters/manage_user.html", context)
