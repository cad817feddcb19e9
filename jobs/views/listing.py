"""The job list: filters, sorting and a pager (``limit + 1`` rows a page) with a total counted
up to ``COUNT_CAP`` (issue 28): a count of every matching job was the one cost of the list that
grew with the table, so past the cap the pager says "more than 10,000"."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from clusters.models import VirtualCluster
from jobs.access import is_admin, listable_jobs, summary_reason
from jobs.filters import JobFilter, filter_errors
from jobs.models import elapsed
from jobs.states import FINAL_JOB_STATES, JobState

PAGE_SIZES = (25, 50, 100)
STOPPABLE = {JobState.WAITING, JobState.RUNNING}
# The page's sort keys -> OpenPAI's order fields (jobs.filters, shared with the API).
ORDER_OF_SORT = {
    "submitted": "id",
    "name": "jobName",
    "user": "username",
    "vc": "vc",
    "state": "state",
    "retries": "retries",
    "tasks": "totalTaskNumber",
    "gpus": "totalGpuNumber",
    "duration": "duration",
}
COLUMNS = [
    ("name", "Name"), ("submitted", "Submitted"), ("user", "User"), ("duration", "Duration"),
    ("vc", "Virtual cluster"), ("retries", "Retries"), ("tasks", "Tasks"), ("gpus", "GPUs"),
    ("state", "State"),
]  # fmt: skip
LIST_FIELDS = (
    "id", "name", "state", "reason", "retries", "task_count", "gpu_count", "created_at",
    "started_at", "completed_at", "owner__username", "virtual_cluster__name",
)  # fmt: skip


@dataclass
class Filters:
    state: str
    user: str
    vc: str
    q: str
    sort: str
    desc: bool
    page: int
    size: int


def positive(text: str | None, default: int) -> int:
    # At most 9 digits: a 5,000-digit page number is too long for int() (a ValueError).
    return int(text) if text and text.isdigit() and len(text) <= 9 and int(text) > 0 else default


def filters_of(request: HttpRequest) -> Filters:
    get = request.GET
    sort = get.get("sort", "submitted")
    size = positive(get.get("size"), PAGE_SIZES[0])
    return Filters(
        state=get.get("state", "").strip()[:100],
        user=get.get("user", request.user.get_username()).strip()[:1000],
        vc=get.get("vc", "").strip()[:1000],
        q=get.get("q", "").strip()[:100],
        sort=sort if sort in ORDER_OF_SORT else "submitted",
        desc=get.get("dir", "desc" if sort == "submitted" else "asc") == "desc",
        page=positive(get.get("page"), 1),
        size=size if size in PAGE_SIZES else PAGE_SIZES[0],
    )


def job_filter(request: HttpRequest, f: Filters) -> tuple[JobFilter, list[str]]:
    """The API's filter (jobs.filters) on the page's choices; a value it refuses is left out,
    and the second item says why (``parameter: rule``), for the page to show."""
    data = {
        "state": f.state,
        "username": f.user,
        "vc": f.vc,
        "keyword": f.q,
        "order": f"{ORDER_OF_SORT[f.sort]},{'DESC' if f.desc else 'ASC'}",
    }
    jobs = listable_jobs(request.user)
    checked = JobFilter(data, queryset=jobs)
    refused = filter_errors(checked)
    if not refused:
        return checked, []
    kept = {name: value for name, value in data.items() if name not in refused}
    why = [f"{name}: {'; '.join(rules)}" for name, rules in refused.items()]
    return JobFilter(kept, queryset=jobs), why


def query(f: Filters, **change: object) -> str:
    params = {
        "state": f.state, "user": f.user, "vc": f.vc, "q": f.q, "sort": f.sort,
        "dir": "desc" if f.desc else "asc", "size": f.size, "page": f.page,
    }  # fmt: skip
    params.update(change)
    return "?" + urlencode(params)


@dataclass(frozen=True)
class Row:
    """One job of the list, every cell ready to print (the template does no work per row)."""

    id: int
    name: str
    owner: str
    vc: str
    state: str
    reason: str
    retries: int
    tasks: int
    gpus: int
    url: str  # the job's page (all of it for its owner and admins, else its status)
    created_iso: str
    created: str
    duration: str
    stoppable: bool


def list_row(row: dict[str, Any], viewer: Any, jobs_path: str) -> Row:
    mine = row["owner__username"] == viewer.get_username() or viewer.is_staff
    created = timezone.localtime(row["created_at"])
    duration = elapsed(row["started_at"], row["completed_at"])
    return Row(
        id=row["id"],
        name=row["name"],
        owner=row["owner__username"],
        vc=row["virtual_cluster__name"],
        state=row["state"],
        reason=row["reason"] if mine else summary_reason(row["reason"]),
        retries=row["retries"],
        tasks=row["task_count"],
        gpus=row["gpu_count"],
        # Every listed job opens: its owner and admins see all of it, others its status.
        url=f"{jobs_path}{quote(row['owner__username'])}~{quote(row['name'])}/",
        created_iso=created.isoformat(),
        created=created.strftime("%Y-%m-%d %H:%M:%S"),
        duration=str(duration).split(".")[0] if duration else "–",
        stoppable=mine and row["state"] in STOPPABLE,
    )


ROW = (
    '<tr id="job-{}"><td>{}</td><td>{}</td><td><time datetime="{}">{}</time></td><td>{}</td>'
    "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
    '<td><span class="state state-{}">{}</span>{}</td></tr>'
)


def row_html(row: Row) -> SafeString:
    """One row of the table, every value escaped here (``html.escape``, as Django's ``escape``
    does it): the template engine costs about 20 us a value and ``format_html`` half of that,
    which at 100 rows and 14 values was most of the page's time."""
    e = html.escape
    box = (
        f'<input type="checkbox" name="job" value="{row.id}" aria-label="select {e(row.name)}">'
        if row.stoppable
        else ""
    )
    name = f'<a href="{e(row.url)}">{e(row.name)}</a>' if row.url else e(row.name)
    reason = (
        f'<br><small class="reason">{e(row.reason)}</small>'
        if row.state == JobState.WAITING
        else ""
    )
    cells = (
        e(row.created_iso), e(row.created), e(row.owner), e(row.duration), e(row.vc),
        row.retries, row.tasks, row.gpus, e(row.state.lower()), e(row.state),
    )  # fmt: skip
    return mark_safe(ROW.format(row.id, box, name, *cells, reason))  # noqa: S308 (escaped above)


COUNT_CAP = 10_000


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    f = filters_of(request)
    start = (f.page - 1) * f.size
    checked, refused = job_filter(request, f)
    rows = list(checked.ordered().values(*LIST_FIELDS)[start : start + f.size + 1])
    total = checked.qs.order_by().values("id")[: COUNT_CAP + 1].count()
    path = reverse("jobs:list")
    shown = rows[: f.size]
    context = {
        "rows": [row_html(list_row(row, request.user, path)) for row in shown],
        # The jobs whose state may still change: the page follows them over a WebSocket.
        "live_ids": [row["id"] for row in shown if row["state"] not in FINAL_JOB_STATES],
        "f": f,
        "has_next": len(rows) > f.size,
        "shown_from": start + 1 if shown else 0,
        "shown_to": start + len(shown),
        "total": f"more than {COUNT_CAP:,}" if total > COUNT_CAP else f"{total:,}",
        "next_url": query(f, page=f.page + 1),
        "prev_url": query(f, page=f.page - 1) if f.page > 1 else "",
        "columns": [
            (
                key,
                label,
                query(f, sort=key, page=1, dir="asc" if f.sort == key and f.desc else "desc"),
            )
            for key, label in COLUMNS
        ],
        "states": JobState.values,
        "vcs": filter_menu_vcs(request.user),
        "sizes": PAGE_SIZES,
        "me": request.user.get_username(),
        "filter_errors": refused,
    }
    return render(request, "jobs/list.html", context)


def filter_menu_vcs(user: Any) -> Any:
    """The virtual clusters of the filter menu: the ones whose jobs ``user`` may see (those
    they may use, and those holding jobs of theirs); a private one's name is not shown to the
    rest (issue 28)."""
    if is_admin(user):
        return VirtualCluster.objects.order_by("name").values_list("name", flat=True)
    usable = VirtualCluster.objects.usable_by(user).values("id")
    return (
        VirtualCluster.objects.filter(Q(id__in=usable) | Q(jobs__owner_id=user.pk))
        .distinct()
        .order_by("name")
        .values_list("name", flat=True)
    )
