"""Whether the reconcile loop runs, for the banner every page shows (``base.html``): in the
page as rendered, and live on an open page, which asks ``GET /scheduler-status`` again every
``SCHEDULER_CHECK_SECONDS`` (``static/portal/scheduler-status.js``).

Every open page of every user asks, so the answer reads one Redis key and no database row:
instead of a session (a query for the session, one for the user), the page holds a signed
ticket of its user, made when it was rendered. The ticket tells nothing but whether the
scheduler is late, which any signed-in user may know; a visitor without one is refused.
"""

from __future__ import annotations

import redis
from django.conf import settings
from django.core import signing
from django.http import HttpRequest, JsonResponse
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_GET

from jobs.wakeup import seconds_since_last_pass

TICKET_SALT = "portal.scheduler-status"


def late_message() -> str | None:
    """The banner's sentence when no reconcile pass has ended for ``SCHEDULER_LATE_SECONDS``
    (before the first pass: since a page first asked), else None (also when Redis does not
    answer: that is said where it matters, the API's 503s, not guessed here)."""
    try:
        age, ever_ran = seconds_since_last_pass()
    except redis.exceptions.RedisError:
        return None
    if age < settings.SCHEDULER_LATE_SECONDS:
        return None
    since = f"has not run for {age:.0f} s" if ever_ran else f"has not run yet ({age:.0f} s)"
    return (
        f"The scheduler {since}: jobs will not start or finish until the Celery worker and "
        "beat are back."
    )


def ticket_for(user_id: int) -> str:
    return signing.dumps(user_id, salt=TICKET_SALT)


@require_GET
def scheduler_status(request: HttpRequest) -> JsonResponse:
    """``{"late": bool, "message": str}`` to a page holding a ticket (``?ticket=``); 403 else."""
    try:
        signing.loads(request.GET.get("ticket", ""), salt=TICKET_SALT)
    except signing.BadSignature:
        return JsonResponse(
            {"code": "Forbidden", "message": "ticket: not a ticket this portal signed"},
            status=403,
        )
    message = late_message()
    response = JsonResponse({"late": message is not None, "message": message or ""})
    patch_cache_control(response, no_store=True)  # a live answer: no cache may keep it
    return response
