"""The job page stays live: it reconnects after its WebSocket drops and still sees the job end,
stops trying when the job is gone, and keeps the SSH config a person opened."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tests.browser.pages import log_in, submit_text
from tests.browser.test_portal_flows import SSH, job
from tests.waiting import wait_for

pytestmark = pytest.mark.browser


def test_the_page_reconnects_and_still_sees_the_job_end(portal_url, browser_page, alice, shared):
    page = browser_page
    release = shared / "release"
    log_in(page, portal_url, "alice", "alice-secret-pw")
    waiting = f"while [ ! -e {release} ]; do sleep 0.2; done; echo released"
    submit_text(page, portal_url, job("dropped", waiting))
    page.evaluate("window.stillTheSamePage = true")
    page.locator("#task-trainer-0 .state", has_text="RUNNING").wait_for()
    page.wait_for_function("window.jobNewsOpened === 1")

    page.evaluate("window.jobNews.close()")  # the connection drops (a proxy, a server restart)
    page.wait_for_function("window.jobNewsOpened === 2")
    release.touch()  # only now may the job end: the news of it comes over the new socket

    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    assert page.evaluate("window.stillTheSamePage") is True
    assert page.locator("#live-status").is_hidden()


# Counts the job page's news sockets as the browser makes and loses them.
COUNT_SOCKETS = """
window.newsSockets = {opened: 0, closed: 0};
const NativeWebSocket = window.WebSocket;
window.WebSocket = class extends NativeWebSocket {
  constructor(url, protocols) {
    super(url, protocols);
    if (!String(url).includes("/ws/jobs/")) return;
    window.newsSockets.opened += 1;
    this.addEventListener("close", () => { window.newsSockets.closed += 1; });
  }
};
"""
COUNT_LIVE_SWAPS = """
window.liveSwaps = 0;
document.addEventListener("htmx:afterSwap", () => { window.liveSwaps += 1; });
"""
IDLE_MS = 30_000  # six times redis-py 8's default read timeout, which closed every socket


def test_a_running_jobs_page_stays_connected_while_nothing_happens(
    portal_url, browser_page, alice, shared
):
    page = browser_page
    page.add_init_script(COUNT_SOCKETS)
    release = shared / "release"
    log_in(page, portal_url, "alice", "alice-secret-pw")
    waiting = f"while [ ! -e {release} ]; do sleep 0.2; done; echo released"
    submit_text(page, portal_url, job("idle", waiting))
    page.locator("#task-trainer-0 .state", has_text="RUNNING").wait_for()
    page.wait_for_function("window.newsSockets.opened >= 1")

    page.wait_for_timeout(IDLE_MS)  # the job runs on and nothing changes

    assert page.evaluate("window.newsSockets") == {"opened": 1, "closed": 0}
    assert page.locator("#live-status").is_hidden()  # no "Live updates paused"
    release.touch()  # the news of the end arrives over the socket opened at the start
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    assert page.evaluate("window.newsSockets") == {"opened": 1, "closed": 0}


def test_a_page_whose_job_is_gone_stops_reconnecting_and_says_so(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("gone", "echo bye"))
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    page.wait_for_function("window.jobNewsOpened === 1")
    Job.objects.filter(name="gone").delete()

    page.evaluate("window.jobNews.close()")

    page.locator("#live-status", has_text="this job is not available").wait_for()
    assert page.evaluate("window.jobNewsRetry") is None  # no further attempt is scheduled


def test_the_ssh_config_stays_open_across_live_refreshes(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("keyed", "sleep 120", SSH))
    page.locator("#ssh .ssh-command").first.wait_for()
    page.click("#ssh-config-details summary")
    assert page.locator("#ssh-config-details .ssh-config").is_visible()

    page.evaluate("window.refreshLive()")  # what news of the job does

    assert page.locator("#ssh-config-details").get_attribute("open") is not None
    assert page.locator("#ssh-config-details .ssh-config").is_visible()


def test_the_log_tails_of_a_running_job_follow_its_output(portal_url, browser_page, alice, shared):
    page = browser_page
    page.add_init_script(COUNT_LIVE_SWAPS)
    more = shared / "more"
    log_in(page, portal_url, "alice", "alice-secret-pw")
    writing = (
        f"echo first line; while [ ! -e {more} ]; do sleep 0.2; done; echo second line; sleep 120"
    )
    submit_text(page, portal_url, job("chatty", writing))
    page.locator("#live pre.tail", has_text="first line").wait_for()
    # The refresh the page makes when its socket opens is done: it cannot be what brings the
    # second line.
    page.wait_for_function("window.jobNewsOpened >= 1 && window.liveSwaps >= 1")
    assert page.locator("#tails-growing").get_attribute("data-growing") == "yes"

    more.touch()  # the task writes again, and nothing about the job or its task changes

    page.locator("#live pre.tail", has_text="second line").wait_for(timeout=20_000)
    assert page.evaluate("window.tailRefreshes") >= 1
    assert page.locator("#live .summary .state", has_text="RUNNING").is_visible()


def test_the_log_tails_of_an_ended_job_are_not_read_again(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("quiet", "echo done"))
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    page.locator("#live pre.tail", has_text="done").wait_for()
    assert page.locator("#tails-growing").get_attribute("data-growing") == ""


TICKING = (
    "seq 1 60 | sed 's/^/early /'; "
    "i=0; while [ $i -lt 120 ]; do i=$((i+1)); echo tick $i; sleep 1; done"
)
AT_END = "(b) => b.scrollHeight - b.scrollTop - b.clientHeight <= 8"


def test_the_log_box_follows_new_lines_and_stays_where_the_user_scrolled(
    portal_url, browser_page, alice
):
    """The box showed the oldest lines and jumped back to the top on every refresh: after 3
    minutes it showed ticks 1-15 while tick 97 was the latest (issue 28)."""
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("ticking", TICKING))
    box = page.locator("#log-trainer-0-stdout")
    page.locator("#log-trainer-0-stdout", has_text="tick 3").wait_for(timeout=20_000)
    refreshes = page.evaluate("window.tailRefreshes")
    page.wait_for_function(f"window.tailRefreshes >= {refreshes + 2}", timeout=30_000)
    assert box.evaluate(AT_END), "the box is not at its end"
    assert "early 1\n" in box.inner_text()  # the whole tail is there, the end in view

    jump = page.locator("button.jump-latest")
    scroll_up_until_held(box, jump)  # the person scrolls up to read
    seen = box.inner_text()
    refreshes = page.evaluate("window.tailRefreshes")
    page.wait_for_function(f"window.tailRefreshes >= {refreshes + 2}", timeout=30_000)
    assert box.inner_text() != seen  # new lines came in meanwhile
    assert box.evaluate("b => b.scrollTop") == 0 and jump.is_visible()

    jump.click()
    assert box.evaluate(AT_END) and not jump.is_visible()
    refreshes = page.evaluate("window.tailRefreshes")
    page.wait_for_function(f"window.tailRefreshes >= {refreshes + 1}", timeout=30_000)
    assert box.evaluate(AT_END)  # following again

    page.locator("#live a.follow").first.click()  # the follow page of trainer-0's stdout
    page.wait_for_url("**/trainer-0/stdout/view/")
    log = page.locator("#log")
    page.locator("#log", has_text="tick").wait_for()
    assert log.evaluate(AT_END)
    scroll_up_until_held(log, page.locator("button.jump-latest"))
    page.wait_for_timeout(4500)  # it reads the tail every 2 s
    assert log.evaluate("b => b.scrollTop") == 0


def scroll_up_until_held(box, jump) -> None:
    """Scroll ``box`` to its top until its "Jump to latest" shows: a scroll that lands while a
    refresh swaps the box in goes to the old, detached one (no scroll event), as a person's
    next scroll would not."""

    def held() -> bool:
        box.evaluate("b => { b.scrollTop = 0; }")
        return jump.is_visible()

    wait_for(held)
