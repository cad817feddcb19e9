"""The job page's Resources: a running task's CPU and memory charts (uPlot, fed by
GET .../usage) fill in live as samples come, as OpenPAI's job metrics page showed each task's
CPU and memory over time."""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from jobs.models import Task, TaskUsage
from tests.browser.pages import log_in, submit_text
from tests.browser.test_portal_flows import job

pytestmark = pytest.mark.browser


def sample_loop(backend, stop: threading.Event) -> None:
    """What beat's ``sample usage`` entry does, more often."""
    from django.db import connection

    from jobs.usage import sample

    try:
        while not stop.is_set():
            sample(backend)
            stop.wait(0.5)
    finally:
        connection.close()


@pytest.fixture
def sampled(backend):
    stop = threading.Event()
    thread = threading.Thread(target=sample_loop, args=(backend, stop), daemon=True)
    thread.start()
    yield stop
    stop.set()
    thread.join(10)


def points(page, chart: str) -> int:
    return int(page.get_attribute(f"#usage-trainer-0-{chart}", "data-points") or 0)


def test_a_running_tasks_cpu_and_memory_charts_fill_in_live(
    portal_url, browser_page, alice, shared, sampled
):
    page = browser_page
    release = shared / "release"
    log_in(page, portal_url, "alice", "alice-secret-pw")
    burning = f"while [ ! -e {release} ]; do :; done; echo released"  # one core, busy
    submit_text(page, portal_url, job("burner", burning))
    page.evaluate("window.stillTheSamePage = true")
    page.locator("#task-trainer-0 .state", has_text="RUNNING").wait_for()

    grown = "n => ['cpu', 'memory'].every(c => {"
    grown += " const box = document.getElementById('usage-trainer-0-' + c);"
    grown += " return box && Number(box.dataset.points) >= n; })"
    page.wait_for_function(grown, arg=3, timeout=60_000)
    assert page.evaluate("window.stillTheSamePage") is True  # refreshed in place, not reloaded
    assert page.locator("#usage-empty").is_hidden()
    memory = page.evaluate("window.usageCharts['trainer-0/memory'].plot.data")
    assert memory[2][-1] == 128  # the memoryMB line
    assert all(value is None or 0 < value < 128 for value in memory[1])
    cpu = page.evaluate("window.usageCharts['trainer-0/cpu'].plot.data[1]")
    assert max(v for v in cpu if v is not None) > 0.3  # the busy loop shows
    assert page.locator("#usage-trainer-0-gpu-util").count() == 0  # no GPU, no GPU charts
    assert page.locator(".usage-warning").count() == 0

    sampled.set()  # no more samples but one near the task's memoryMB (120 of 128 MB)
    task = Task.objects.get(attempt__job__name="burner")
    TaskUsage.objects.create(task=task, time=timezone.now(), memory_bytes=120 * 1024 * 1024)
    warning = page.locator(".usage-warning[data-kind=nearMemoryLimit]")
    warning.wait_for()  # on the page's next tick, without a reload
    assert "trainer-0 is near its memory limit: 120 of its 128 MB" in warning.inner_text()
    release.touch()
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()


def test_a_short_tasks_single_sample_is_charted_on_a_minute_not_years(
    portal_url, browser_page, alice
):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("blink", "true"))
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    task = Task.objects.get(attempt__job__name="blink")
    TaskUsage.objects.filter(task=task).delete()
    sampled_at = timezone.now()
    TaskUsage.objects.create(task=task, time=sampled_at, memory_bytes=5 * 1024 * 1024)
    page.reload()
    page.locator("#usage-trainer-0-memory[data-points='1']").wait_for()
    low, high = page.evaluate(
        "[window.usageCharts['trainer-0/memory'].plot.scales.x.min,"
        " window.usageCharts['trainer-0/memory'].plot.scales.x.max]"
    )
    assert low < sampled_at.timestamp() < high
    assert high - low <= 60
