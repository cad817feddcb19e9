"""A job's detail that waits for its end: ``GET /api/v2/jobs/<user>~<name>?wait=<seconds>``.

A script that waits for its job, as ``sbatch --wait`` or ``kubectl wait`` do, asks once and is
answered when the job has finished, or once ``wait`` seconds have passed, with the job's detail
as without ``wait``; it asks again if it wants to wait longer. Without it, a script asks over
and over, and each answer costs the web server 8 to 10 ms of CPU (``bench/e2e.py``'s portal, 2
CPUs): a script asking every second for an hour-long job asks 3,600 times. A waiting client is
told of a trivial job's end about as soon as one asking every 10 ms (docs/speed.md), with one
request. Signed-in callers wait; an anonymous one (``API_ANONYMOUS_JOB_STATUS``) is answered
at once.

The wait listens to the job's news (``jobs.news``, over the channel layer, as the job's page
does) and reads the job's state again at each, unless the news says the job has finished;
without the channel layer (Redis down) it reads the state every ``POLL_SECONDS``. It holds no
database connection while it waits (there are ten a process: ``portal.settings``), only its
request's thread (the sync middleware's); past ``API_WAITS_MAX`` waits at once in a process, a
wait answers at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django import forms
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from rest_framework.exceptions import ValidationError
from rest_framework.request import ForcedAuthentication

from jobs.access import listable_jobs, named
from jobs.models import Job
from jobs.news import group_name
from jobs.states import FINAL_JOB_STATES

MAX_WAIT_SECONDS = 50  # answered within a proxy's usual read timeout (nginx's: 60 s)
# Set on a request answered after its wait: it was authenticated and counted against its
# caller's rate limit at its start (``waited_caller``).
WAITED = "portal_waited_caller"
POLL_SECONDS = 1.0
log = logging.getLogger(__name__)
waiters = 0  # waits now, in this process (only its event loop counts them)


class WaitForm(forms.Form):
    wait = forms.IntegerField(min_value=0, max_value=MAX_WAIT_SECONDS, required=False)


def wait_seconds(query: Any) -> int:
    """The ``wait`` of a query, 0 without one; 400 naming it past 0 to ``MAX_WAIT_SECONDS``."""
    form = WaitForm(query)
    if not form.is_valid():
        raise ValidationError({name: list(errors) for name, errors in form.errors.items()})
    return form.cleaned_data["wait"] or 0


def waiting(view: Callable[..., HttpResponse]) -> Callable[..., Any]:
    """``view`` (JobDetailView's, which checks ``wait``), answering after the wait above; to
    Django and the API's schema it is that view still."""

    async def detail(request: HttpRequest, username: str, name: str) -> HttpResponse:
        global waiters
        response = await sync_to_async(view)(request, username=username, name=name)
        seconds = wait_seconds(request.GET) if response.status_code == 200 else 0
        if not seconds or response.data.get("jobStatus", {}).get("state") in FINAL_JOB_STATES:
            return response
        if not request.user.is_authenticated:
            return response
        if waiters >= settings.API_WAITS_MAX:
            log.warning(
                "%s waits at once: a wait for %s~%s answers at once", waiters, username, name
            )
            return response
        waiters += 1
        try:
            await sync_to_async(give_back_connection)()  # none held while waiting
            await until_finished(request.user, username, name, seconds)
        finally:
            waiters -= 1
        caller = ForcedAuthentication(request.user, getattr(request, "auth", None))
        setattr(request, WAITED, caller)  # its answer: the same request, not another
        return await sync_to_async(view)(request, username=username, name=name)

    detail.cls = view.cls  # type: ignore[attr-defined]
    detail.initkwargs = view.initkwargs  # type: ignore[attr-defined]
    detail.view_class = view.view_class  # type: ignore[attr-defined]
    detail.csrf_exempt = True  # type: ignore[attr-defined] - as DRF's views: tokens, no cookies
    return detail


def waited_caller(request: Any) -> ForcedAuthentication | None:
    """The caller of a request answered after its wait, as its first read authenticated it:
    the answer is one request, not two. Measured reason: run again, the token's lookup and
    the rate limit made the answer 9.6-10.4 ms in-process against 5.4-6.2 ms (2 CPUs), on the
    way from a job's end to its waiting client, and the wait counted twice against its
    caller's limit."""
    return getattr(request, WAITED, None)


async def until_finished(user: Any, username: str, name: str, seconds: int) -> None:
    """Return once the job has finished (or is no longer there), or after ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    job_id = await released(job_id_of)(user, username, name)
    if job_id is None:
        return
    layer, group = get_channel_layer(), group_name(job_id)
    channel: str | None = None
    try:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)  # before the state is read: no change missed
    except Exception:
        channel = None
        log.warning("no news of job %s (the channel layer): its wait reads its state", job_id)
    try:
        while (left := deadline - loop.time()) > 0:
            if await released(state_of)(job_id) in (None, *FINAL_JOB_STATES):
                return
            channel, finished = await news_or_nap(layer, channel, left)
            if finished:
                return
    finally:
        if channel is not None:
            try:
                await layer.group_discard(group, channel)
            except Exception:  # the group's entry expires on its own (channels_redis)
                log.warning("could not leave %s", group, exc_info=True)


async def news_or_nap(layer: Any, channel: str | None, left: float) -> tuple[str | None, bool]:
    """Wait for the job's next news on ``channel`` (at most ``left`` seconds), or nap for
    ``POLL_SECONDS`` without one; the channel to listen on next (None once it failed), and
    whether the news said the job has finished (``jobs.news.publish``). Answered on that
    without reading the state again: from a trivial job's end in its row to the waiting
    client, 14.9 and 15.5 ms against 20.9, 18.4, 15.0 and 18.7 ms reading the state first
    (``bench/e2e.py``'s portal, 2 CPUs, medians of 20 jobs a run, taken in turn). Reading the
    job's detail at each news instead was as quick, but ran the request's authentication and
    rate limit again at each."""
    if channel is not None:
        try:
            news = await asyncio.wait_for(layer.receive(channel), left)
            return channel, bool(news.get("finished"))
        except TimeoutError:
            return channel, False
        except Exception:
            log.warning("the channel layer failed: the wait reads the job's state", exc_info=True)
    await asyncio.sleep(min(POLL_SECONDS, left))
    return None, False


def released(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` run as the request's sync code, its database connection given back
    (to the pool) once done."""

    def run(*args: Any) -> Any:
        try:
            return function(*args)
        finally:
            give_back_connection()

    return sync_to_async(run)


def give_back_connection() -> None:
    """This thread's database connection back to the pool (closed where there is none)."""
    connection.close()


def job_id_of(user: Any, username: str, name: str) -> int | None:
    return listable_jobs(user).filter(named(username, name)).values_list("id", flat=True).first()


def state_of(job_id: int) -> str | None:
    return Job.objects.filter(id=job_id).values_list("state", flat=True).first()
