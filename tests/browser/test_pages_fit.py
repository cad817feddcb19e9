"""Every page fits the window from a phone (375 px) to a wide screen (1920 px): no horizontal
page scroll; a wide table scrolls inside itself (issue 28: at 820 px the job page was 1229 px
wide and the job list cut off its State column)."""

from __future__ import annotations

import pytest

from jobs import lifecycle
from tests.browser.pages import log_in
from tests.browser.test_portal_flows import SSH, job
from tests.waiting import wait_for

pytestmark = pytest.mark.browser

WIDTHS = (375, 820, 1920)
OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def pages(portal_url: str) -> list[str]:
    job_page = f"{portal_url}/jobs/admin~wide/"
    return [
        f"{portal_url}/",
        f"{portal_url}/jobs/",
        job_page,
        f"{job_page}clone/",
        f"{job_page}logs/1/trainer-0/stdout/view/",
        f"{portal_url}/jobs/submit/",
        f"{portal_url}/virtual-clusters/",
        f"{portal_url}/cluster/",
        f"{portal_url}/virtual-clusters/default/",
        f"{portal_url}/manage/virtual-clusters/",
        f"{portal_url}/manage/virtual-clusters/default/",
        f"{portal_url}/manage/users/",
        f"{portal_url}/manage/users/admin/",
        f"{portal_url}/manage/nodes/",
        f"{portal_url}/account/",
        f"{portal_url}/account/alerts/",
    ]


def test_every_page_fits_from_375_to_1920_px(portal_url, browser_page, admin):
    from jobs.models import Task

    admin.set_password("admin-secret-pw")
    admin.save()
    long_line = "echo " + "a-very-long-unbroken-word-" * 20
    lifecycle.submit(admin, job("wide", f"{long_line}; sleep 120", SSH))
    wait_for(lambda: Task.objects.filter(state="RUNNING").exists())
    page = browser_page
    log_in(page, portal_url, "admin", "admin-secret-pw")
    too_wide = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for url in pages(portal_url):
            page.goto(url)
            page.wait_for_load_state("networkidle")
            extra = page.evaluate(OVERFLOW)
            if extra > 0:
                too_wide.append(f"{url} at {width} px: {extra} px too wide")
    assert too_wide == [], "\n".join(too_wide)
