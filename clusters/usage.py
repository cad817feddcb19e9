"""Each virtual cluster's use over time against its guarantee (issue 28).

Beat calls :func:`record` every minute (``jobs.tasks.sample_vc_usage``): one ``VCUsageSample``
per virtual cluster from ``jobs.vc_usage.overview()``, all in one insert, so sampling takes the
same few queries however many virtual clusters there are. :func:`prune` then thins the samples
older than a day to one an hour and deletes those older than ``VC_USAGE_RETENTION_DAYS``: a day
at full detail for the pages' 24 h charts, a month of hourly points for the API, and a table
that stops growing (about ``VCs * (1440 + 24 * days)`` rows).

OpenPAI shows the virtual clusters' use only as it is now (webportal
``src/app/home/home/virtual-cluster-statistics.jsx``; history is left to Prometheus and
Grafana); here the history is kept by the portal itself, so every user sees the use of the
virtual clusters they may use (``usable_by``) without access to Grafana.

:func:`charts` draws the pages' charts as plain SVG geometry (no JavaScript): a polyline of
the use, a dashed line at the guarantee, and the peak and average as text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Min
from django.db.models.functions import Trunc
from django.utils import timezone

from clusters.models import VCUsageSample
from clusters.overview import VCView

SAMPLE_SECONDS = 60.0  # beat's interval (portal.celery)
FULL_DETAIL = timedelta(days=1)  # younger samples are all kept; older ones one an hour
CHART_HOURS = 24


def record(views: list[VCView], now: datetime | None = None) -> int:
    """One sample per virtual cluster of what its running jobs hold now (``views``, from
    ``jobs.vc_usage.overview``; borrowed included: use past the guarantee is what the chart
    shows) and how many jobs run and wait. Returns how many samples it wrote; one insert,
    whatever the count."""
    now = now or timezone.now()
    samples = []
    for view in views:
        held = view.used + view.borrowed
        samples.append(
            VCUsageSample(
                time=now,
                virtual_cluster=view.vc,
                cpu=max(held.cpu, 0),
                memory_mb=max(held.memory_mb, 0),
                gpus={kind: n for kind, n in sorted(held.gpus.items()) if n > 0},
                running=view.running,
                waiting=view.waiting,
            )
        )
    VCUsageSample.objects.bulk_create(samples)
    return len(samples)


def prune(now: datetime | None = None) -> tuple[int, int]:
    """Thin the samples older than a day to the first of each hour (per virtual cluster), and
    delete those older than ``VC_USAGE_RETENTION_DAYS``; returns (thinned, expired).

    Two deletes, each one query. The whole older range is thinned each time (not only the
    hour that just turned a day old), so a beat that was down catches up by itself. The first
    of an hour is the lowest id: beat writes samples in time order.
    """
    now = now or timezone.now()
    expired, _ = VCUsageSample.objects.filter(
        time__lt=now - timedelta(days=settings.VC_USAGE_RETENTION_DAYS)
    ).delete()
    old = VCUsageSample.objects.filter(time__lt=now - FULL_DETAIL)
    firsts = (
        old.annotate(hour=Trunc("time", "hour", tzinfo=UTC))
        .values("virtual_cluster_id", "hour")
        .annotate(first=Min("id"))
        .values("first")
    )
    thinned, _ = old.exclude(id__in=firsts).delete()
    return thinned, expired


@dataclass(frozen=True)
class Point:
    time: datetime
    cpu: int
    memory_mb: int
    gpus: int  # all types together
    running: int
    waiting: int

    @property
    def epoch_ms(self) -> int:
        return round(self.time.timestamp() * 1000)


def points(vc_ids: Iterable[int], since: datetime) -> dict[int, list[Point]]:
    """The samples of the virtual clusters ``vc_ids`` since ``since``, oldest first; one
    query for all of them."""
    rows = (
        VCUsageSample.objects.filter(virtual_cluster_id__in=list(vc_ids), time__gte=since)
        .order_by("time", "id")
        .values_list("virtual_cluster_id", "time", "cpu", "memory_mb", "gpus", "running", "waiting")
    )
    found: dict[int, list[Point]] = {}
    for vc_id, time, cpu, memory_mb, gpus, running, waiting in rows:
        total = sum(n for n in (gpus or {}).values() if isinstance(n, int))
        found.setdefault(vc_id, []).append(Point(time, cpu, memory_mb, total, running, waiting))
    return found


# The charts' drawing box (SVG user units); pages stretch it to their width.
WIDTH, HEIGHT, PAD = 600, 120, 4
COLUMNS = 300  # at most one drawn point per 1/300 of the window: the highest in it
GAP = timedelta(minutes=5)  # samples further apart than this: beat was down, the line breaks


@dataclass
class Chart:
    """One resource of one virtual cluster over the window, ready for the template."""

    label: str  # "CPU", "GPUs"
    key: str  # for ids: "cpu", "gpus"
    values: list[tuple[datetime, int]]
    guaranteed: int | None  # None: no limit, no dashed line
    start: datetime
    end: datetime
    lines: list[str] = field(default_factory=list)  # polylines' ``points`` attributes

    def __post_init__(self) -> None:
        self.lines = self.draw()

    @property
    def peak(self) -> int:
        return max((v for _, v in self.values), default=0)

    @property
    def average(self) -> float:
        return sum(v for _, v in self.values) / len(self.values) if self.values else 0.0

    @property
    def top(self) -> int:
        """The value at the chart's top edge: what is used at most, or the guarantee."""
        return max(self.peak, self.guaranteed or 0, 1)

    @property
    def over(self) -> bool:
        """Whether the use went past the guarantee (borrowing) in the window."""
        return self.guaranteed is not None and self.peak > self.guaranteed

    def y(self, value: int) -> float:
        return round(HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / self.top, 1)

    def x(self, when: datetime) -> float:
        span = (self.end - self.start).total_seconds() or 1.0
        share = min(max((when - self.start).total_seconds() / span, 0.0), 1.0)
        return round(WIDTH * share, 1)

    @property
    def guarantee_y(self) -> float | None:
        return None if self.guaranteed is None else self.y(self.guaranteed)

    def draw(self) -> list[str]:
        """The polylines: one per run of samples without a gap, at most ``COLUMNS`` points
        in all, each the highest of its column so that a short peak still shows."""
        runs: list[list[tuple[int, float, int]]] = []  # (column, x, highest)
        last: datetime | None = None
        for when, value in self.values:
            x = self.x(when)
            column = int(x * COLUMNS / WIDTH)
            if last is None or when - last > GAP:
                runs.append([])
            last = when
            run = runs[-1]
            if run and run[-1][0] == column:
                run[-1] = (column, run[-1][1], max(run[-1][2], value))
            else:
                run.append((column, x, value))
        lines = []
        for run in runs:
            if len(run) == 1:  # one sample: a short dash, else nothing would show
                column, x, value = run[0]
                run = [(column, max(x - 2, 0.0), value), (column, min(x + 2, WIDTH), value)]
            lines.append(" ".join(f"{x},{self.y(v)}" for _, x, v in run))
        return lines

    @property
    def text(self) -> str:
        """The chart in words, for screen readers and for reading exact numbers."""
        if not self.values:
            return f"{self.label}: no sample yet in the last {CHART_HOURS} h (one a minute)."
        count = len(self.values)
        guarantee = "no limit" if self.guaranteed is None else f"{self.guaranteed} guaranteed"
        return (
            f"{self.label} over the last {CHART_HOURS} h: peak {self.peak}, "
            f"average {self.average:.1f}, {guarantee}"
            f"{' (went past it)' if self.over else ''}; {count} sample{'' if count == 1 else 's'}."
        )


def charts_for(view: VCView, samples: list[Point], end: datetime) -> list[Chart]:
    """CPU always; GPUs (all types together) when the virtual cluster guarantees some."""
    start = end - timedelta(hours=CHART_HOURS)
    found = [
        Chart("CPU", "cpu", [(p.time, p.cpu) for p in samples], view.quota.cpu, start, end),
    ]
    gpu_quota = view.quota.gpus
    if gpu_quota and sum(gpu_quota.values()) > 0:
        gpus = [(p.time, p.gpus) for p in samples]
        found.append(Chart("GPUs", "gpus", gpus, sum(gpu_quota.values()), start, end))
    return found


def charts(views: list[VCView], now: datetime | None = None) -> dict[int, list[Chart]]:
    """Per virtual cluster (by id) of ``views``: its charts of the last day; one query."""
    now = now or timezone.now()
    found = points([v.vc.id for v in views], now - timedelta(hours=CHART_HOURS))
    return {v.vc.id: charts_for(v, found.get(v.vc.id, []), now) for v in views}
