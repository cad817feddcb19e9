"""Each virtual cluster's use over time against its guarantee (issue 28): beat samples every
virtual cluster each minute in one insert, thins samples past a day to one an hour, expires
them after VC_USAGE_RETENTION_DAYS, and the cluster and virtual-cluster pages chart the last day
(SVG, no JavaScript) with the peak and average in words. OpenPAI shows only the use of now
(webportal src/app/home/home/virtual-cluster-statistics.jsx)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters import usage
from clusters.models import VCUsageSample, VirtualCluster
from jobs import lifecycle
from jobs.tasks import sample_vc_usage
from jobs.vc_usage import overview
from tests.clusters.helpers import cluster, job_text, vc
from tests.clusters.test_cluster_page import gpu_job, page_of, run_on

pytestmark = pytest.mark.django_db

NOW = datetime(2030, 5, 17, 12, 0, 30, tzinfo=UTC)


def sample(vc_: VirtualCluster, when: datetime, cpu: int = 0, **extra: object) -> VCUsageSample:
    return VCUsageSample.objects.create(time=when, virtual_cluster=vc_, cpu=cpu, **extra)


def test_beat_samples_every_virtual_cluster_each_minute(settings):
    from portal.celery import schedule_reconcile

    app = Celery("probe", set_as_current=False)
    schedule_reconcile(sender=app)
    entry = app.conf.beat_schedule["sample virtual clusters' use"]
    assert entry["task"] == "jobs.tasks.sample_vc_usage" == sample_vc_usage.name
    assert entry["schedule"] == usage.SAMPLE_SECONDS == 60.0


def test_a_sample_holds_what_running_jobs_hold_borrowed_included_and_the_queue(alice):
    cluster(cpu=16, gpus={"V100": 4})
    research = vc("research", alice, cpu=2, gpus={"V100": 1})
    run_on(lifecycle.submit(alice, gpu_job("a", 1, "V100", cpu=2), virtual_cluster="research"))
    borrowed = lifecycle.submit(alice, gpu_job("b", 1, "V100", cpu=3), virtual_cluster="research")
    run_on(borrowed)
    type(borrowed).objects.filter(id=borrowed.id).update(borrowing=True)
    lifecycle.submit(alice, job_text("waits"), virtual_cluster="research")
    assert usage.record(overview()[0], NOW) == VirtualCluster.objects.count()
    got = VCUsageSample.objects.get(virtual_cluster=research)
    assert (got.time, got.cpu, got.memory_mb, got.gpus) == (NOW, 5, 2000, {"V100": 2})
    assert (got.running, got.waiting) == (2, 1)
    empty = VCUsageSample.objects.get(virtual_cluster__name="default")
    assert (empty.cpu, empty.gpus, empty.running, empty.waiting) == (0, {}, 0, 0)


def test_sampling_takes_as_many_queries_for_many_virtual_clusters_as_for_one(alice):
    cluster(cpu=64, memory_mb=640_000)
    VirtualCluster.objects.named("default")

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            sample_vc_usage()
        return len(seen)

    one = queries()
    for i in range(6):
        vc(f"team-{i}", alice, cpu=4)
        run_on(lifecycle.submit(alice, job_text(f"job-{i}"), virtual_cluster=f"team-{i}"))
        lifecycle.submit(alice, job_text(f"waits-{i}"), virtual_cluster=f"team-{i}")
    assert queries() == one
    assert VCUsageSample.objects.count() == 1 + 7


def test_samples_past_a_day_are_thinned_to_the_first_of_each_hour(alice):
    research, other = vc("research", alice), vc("other", alice)
    day_ago = NOW - timedelta(days=1)
    old_hour = day_ago.replace(minute=0, second=0) - timedelta(hours=3)  # 3 h past a day
    for minute in range(0, 60, 10):  # six samples in one old hour, for each of two VCs
        for each in (research, other):
            sample(each, old_hour + timedelta(minutes=minute, seconds=5), cpu=minute)
    recent = [sample(research, day_ago + timedelta(minutes=m)) for m in (1, 2, 3)]
    thinned, expired = usage.prune(NOW)
    assert (thinned, expired) == (10, 0)
    kept = VCUsageSample.objects.filter(time__lt=day_ago)
    assert sorted(kept.values_list("virtual_cluster__name", "cpu")) == [
        ("other", 0),
        ("research", 0),
    ]
    assert set(VCUsageSample.objects.filter(time__gte=day_ago)) == set(recent)  # all kept
    assert usage.prune(NOW) == (0, 0)  # thinning twice takes nothing more


def test_samples_older_than_VC_USAGE_RETENTION_DAYS_are_deleted(settings, alice):
    settings.VC_USAGE_RETENTION_DAYS = 3
    research = vc("research", alice)
    gone = sample(research, NOW - timedelta(days=3, minutes=1))
    kept = sample(research, NOW - timedelta(days=2, hours=23))
    assert usage.prune(NOW) == (0, 1)
    assert list(VCUsageSample.objects.all()) == [kept]
    assert not VCUsageSample.objects.filter(id=gone.id).exists()


def section(page: str, name: str) -> str:
    return page.split(f'id="vc-{name}"')[1].split("</section>")[0]


def test_the_cluster_page_charts_each_virtual_clusters_day_against_its_guarantee(client, alice):
    cluster(cpu=16, gpus={"V100": 8})
    research = vc("research", alice, cpu=8, gpus={"V100": 4})
    now = timezone.now()
    for minutes, cpu, gpus in [(90, 2, 1), (60, 12, 6), (30, 4, 2), (2000, 99, 99)]:
        sample(research, now - timedelta(minutes=minutes), cpu=cpu, gpus={"V100": gpus})
    part = section(page_of(client, alice), "research")
    cpu = part.split('id="usage-research-cpu"')[1].split("</figure>")[0]
    assert "<svg" in cpu and '<polyline class="use" points="' in cpu
    assert '<line class="guarantee"' in cpu  # the dashed line at 8
    # The text alternative: the 2000-minutes-old sample is out of the window.
    assert "CPU over the last 24 h: peak 12, average 6.0, 8 guaranteed (went past it)" in cpu
    gpus = part.split('id="usage-research-gpus"')[1].split("</figure>")[0]
    assert "GPUs over the last 24 h: peak 6, average 3.0, 4 guaranteed (went past it)" in gpus
    # The guarantee's line sits at 8/12 of the chart's height (the peak is the top).
    y = float(re.search(r'class="guarantee"[^>]* y1="([\d.]+)"', cpu).group(1))
    assert y == round(usage.HEIGHT - usage.PAD - (usage.HEIGHT - 2 * usage.PAD) * 8 / 12, 1)


def test_a_virtual_cluster_without_a_gpu_quota_has_a_cpu_chart_only(client, alice):
    cluster(cpu=16)
    vc("cpus", alice, cpu=4, gpus={})
    part = section(page_of(client, alice), "cpus")
    assert 'id="usage-cpus-cpu"' in part and 'id="usage-cpus-gpus"' not in part
    assert "CPU: no sample yet in the last 24 h" in part
    default = section(page_of(client, alice), "default")
    assert 'id="usage-default-cpu"' in default and '<line class="guarantee"' not in default


def test_beat_being_down_breaks_the_line_instead_of_drawing_across_the_gap(alice):
    research = vc("research", alice, cpu=4)
    now = timezone.now()
    for minutes in (120, 119, 118, 30, 29):
        sample(research, now - timedelta(minutes=minutes), cpu=2)
    (chart,) = usage.charts([v for v in overview()[0] if v.vc == research], now)[research.id]
    assert len(chart.lines) == 2


def test_a_private_virtual_clusters_chart_is_hidden_from_a_non_member(client, alice, bob):
    cluster(cpu=8)
    research = vc("research", alice, cpu=4)
    sample(research, timezone.now() - timedelta(minutes=5), cpu=3)
    bobs = page_of(client, bob)
    assert "usage-research" not in bobs and "research" not in bobs
    assert 'id="usage-research-cpu"' in page_of(client, alice)
    client.force_login(bob)
    assert client.get("/virtual-clusters/research/").status_code == 404


def test_the_virtual_clusters_page_charts_its_day(client, alice):
    cluster(cpu=8)
    research = vc("research", alice, cpu=4)
    sample(research, timezone.now() - timedelta(minutes=5), cpu=3)
    client.force_login(alice)
    page = client.get("/virtual-clusters/research/").content.decode()
    assert 'id="usage-research-cpu"' in page
    assert "CPU over the last 24 h: peak 3, average 3.0, 4 guaranteed; 1 sample." in page


def test_the_cluster_pages_queries_do_not_grow_with_samples_or_virtual_clusters(client, alice):
    cluster(cpu=64, memory_mb=640_000, gpus={"V100": 8})
    client.force_login(alice)

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert client.get("/cluster/").status_code == 200
        return len(seen)

    first = vc("team-0", alice, cpu=4, gpus={"V100": 1})
    sample(first, timezone.now() - timedelta(minutes=1), cpu=1)
    one = queries()
    now = timezone.now()
    for i in range(1, 5):
        team = vc(f"team-{i}", alice, cpu=4, gpus={"V100": 1})
        for minute in range(1, 30):
            sample(team, now - timedelta(minutes=minute), cpu=i, gpus={"V100": 1})
    assert queries() == one
