"""``/account/``: the signed-in person's own page: where their account is kept, and their API
tokens, as OpenPAI's portal offered them (list, make an application token for a script, revoke).
A new token's clear text is shown once, on the answer to the POST that made it (never stored,
never in a redirect or a message that outlives the page); the list shows each by its prefix."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.directory import source_of
from accounts.models import Account, ApiToken

SOURCES = dict(Account.SOURCES)


def account_page(request: HttpRequest, new_token: str = "", status: int = 200) -> HttpResponse:
    user = request.user
    context = {
        "source": SOURCES[source_of(user)],
        "tokens": ApiToken.objects.active().filter(user=user).order_by("-created_at"),
        "new_token": new_token,
        "application_days": settings.API_APPLICATION_TOKEN_SECONDS // 86400,
    }
    return render(request, "accounts/account.html", context, status=status)


@login_required
def account(request: HttpRequest) -> HttpResponse:
    return account_page(request)


@login_required
@require_POST
def new_application_token(request: HttpRequest) -> HttpResponse:
    _, token = ApiToken.objects.issue(
        request.user, settings.API_APPLICATION_TOKEN_SECONDS, kind="application"
    )
    return account_page(request, new_token=token)


@login_required
@require_POST
def revoke_token(request: HttpRequest, token_id: int) -> HttpResponse:
    gone, _ = ApiToken.objects.filter(id=token_id, user=request.user).delete()
    if gone:
        messages.success(request, "token revoked: scripts using it are refused from now on")
    else:
        messages.error(request, "no such token of yours")
    return redirect("account")
