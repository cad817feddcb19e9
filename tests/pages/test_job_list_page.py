"""The job list: columns, filters, sorting, a pager with a capped count, stopping several jobs."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from jobs import lifecycle
from jobs.models import Job
from jobs.states import JobState
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def submit_many(user, n: int, prefix: str = "job") -> list[Job]:
    return [lifecycle.submit(user, hello_job(name=f"{prefix}{i:03d}")) for i in range(n)]


def test_the_list_shows_every_column(alice):
    submit_many(alice, 1)
    body = client_for(alice).get("/jobs/").content.decode()
    for column in ("Name", "Submitted", "User", "Duration", "Virtual cluster", "Retries"):
        assert column in body
    assert "Tasks" in body and "GPUs" in body and "WAITING" in body
    assert "waiting to be admitted" in body  # the waiting reason


def test_filters_by_state_user_vc_and_keyword(alice, bob):
    jobs = submit_many(alice, 3)
    lifecycle.submit(bob, hello_job(name="bobs_job"))
    lifecycle.stop(jobs[0], alice)
    web = client_for(alice)
    stopped = web.get("/jobs/?state=STOPPED").content.decode()
    assert "job000" in stopped and "job001" not in stopped
    assert "job002" in web.get("/jobs/?q=002").content.decode()
    assert "job001" not in web.get("/jobs/?q=002").content.decode()
    everyone = web.get("/jobs/?user=").content.decode()
    assert "bobs_job" in everyone  # bob's job runs in a virtual cluster alice may use
    assert "bobs_job" in web.get("/jobs/?user=bob&vc=default").content.decode()
    assert "job000" not in web.get("/jobs/?user=bob").content.decode()
    assert "bobs_job" not in web.get("/jobs/?vc=nope&user=").content.decode()
    nobody = web.get("/jobs/?user=nobody").content.decode()
    assert "No jobs" in nobody and "job000" not in nobody and "bobs_job" not in nobody


def test_another_users_job_links_to_its_status_without_a_stop_box(alice, bob):
    job = lifecycle.submit(bob, hello_job(name="bobs_job"))
    body = client_for(alice).get("/jobs/?user=").content.decode()
    assert '<a href="/jobs/bob~bobs_job/">bobs_job</a>' in body
    assert f'name="job" value="{job.id}"' not in body


def test_sorting_by_name_both_ways(alice):
    submit_many(alice, 3)
    web = client_for(alice)
    ascending = web.get("/jobs/?sort=name&dir=asc").content.decode()
    assert ascending.index("job000") < ascending.index("job002")
    descending = web.get("/jobs/?sort=name&dir=desc").content.decode()
    assert descending.index("job002") < descending.index("job000")


@pytest.mark.parametrize(
    "sort", ["submitted", "user", "vc", "state", "retries", "tasks", "gpus", "duration"]
)
def test_every_sort_key_answers(alice, sort):
    submit_many(alice, 2)
    assert client_for(alice).get(f"/jobs/?sort={sort}").status_code == 200


def test_the_pager_counts_the_matching_jobs_up_to_a_cap(alice, monkeypatch):
    from jobs.views import listing

    submit_many(alice, 30)
    web = client_for(alice)
    with CaptureQueriesContext(connection) as queries:
        first = web.get("/jobs/").content.decode()
    counts = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    assert len(counts) == 1 and "LIMIT 10001" in counts[0].upper()  # never every row
    assert "job029" in first and "job004" not in first and 'rel="next"' in first
    assert '<span id="pager-count">1–25 of 30 · page 1</span>' in first
    second = web.get("/jobs/?page=2").content.decode()
    assert "job004" in second and "job029" not in second and 'rel="next"' not in second
    assert "26–30 of 30" in second
    assert "1–1 of 1 " in web.get("/jobs/?q=job007").content.decode()
    monkeypatch.setattr(listing, "COUNT_CAP", 20)
    assert "1–25 of more than 20 " in web.get("/jobs/").content.decode()


def test_the_number_of_queries_does_not_grow_with_the_page_size(alice):
    submit_many(alice, 60)
    web = client_for(alice)
    counts = []
    for size in (25, 50, 100):
        with CaptureQueriesContext(connection) as queries:
            web.get(f"/jobs/?size={size}")
        counts.append(len(queries))
    assert counts[0] == counts[1] == counts[2]


def test_bad_parameters_fall_back_to_defaults(alice):
    web = client_for(alice)
    assert web.get("/jobs/?page=-1&size=7&sort=evil&state=NOPE").status_code == 200


def test_stopping_several_selected_jobs(alice):
    jobs = submit_many(alice, 3)
    response = client_for(alice).post("/jobs/stop/", {"job": [jobs[0].id, jobs[1].id]})
    assert response.status_code == 302
    states = dict(Job.objects.values_list("name", "state"))
    assert states == {"job000": "STOPPED", "job001": "STOPPED", "job002": "WAITING"}


def test_nobody_stops_another_users_jobs_from_the_list(alice, bob):
    job = lifecycle.submit(alice, hello_job(name="mine"))
    client_for(bob).post("/jobs/stop/", {"job": [job.id]})
    job.refresh_from_db()
    assert job.state == JobState.WAITING


def test_an_admin_stops_anyones_jobs_from_the_list(alice, admin):
    job = lifecycle.submit(alice, hello_job(name="mine"))
    client_for(admin).post("/jobs/stop/", {"job": [job.id]})
    job.refresh_from_db()
    assert job.state == JobState.STOPPED


def test_a_row_escapes_what_it_shows():
    from jobs.views.listing import Row, row_html

    row = Row(
        id=7, name="a&b", owner="o'neil", vc="<vc>", state="WAITING", reason='<img src=x a="1">',
        retries=0, tasks=1, gpus=0, url="/jobs/o%27neil~a%26b/", created_iso="t", created="t",
        duration="–", stoppable=True,
    )  # fmt: skip
    html = str(row_html(row))
    assert "<img" not in html and "&lt;img src=x a=&quot;1&quot;&gt;" in html
    assert "&lt;vc&gt;" in html and "o&#x27;neil" in html and ">a&amp;b</a>" in html


def test_the_list_names_the_jobs_it_follows_live(alice):
    import json
    import re

    waiting, ended = submit_many(alice, 2)
    Job.objects.filter(id=ended.id).update(state=JobState.SUCCEEDED)
    body = client_for(alice).get("/jobs/").content.decode()
    listed = re.search(r'<script id="live-ids" type="application/json">(.*?)</script>', body)
    assert listed and json.loads(listed.group(1)) == [waiting.id]
    assert 'new WebSocket(scheme + location.host + "/ws/jobs/?ids="' in body


def test_stop_and_bulk_stop_ask_first_and_still_post_without_javascript(alice):
    job = submit_many(alice, 1)[0]
    client = client_for(alice)
    listing = client.get("/jobs/").content.decode()
    assert 'id="bulk-stop"' in listing and "confirm(ask)" in listing
    page = client.get(f"/jobs/alice~{job.name}/").content.decode()
    assert 'id="stop-form"' in page and 'confirm("Stop " + stopForm.dataset.job' in page
    assert client.post(f"/jobs/alice~{job.name}/stop/").status_code == 302


def test_the_filter_menu_names_only_the_virtual_clusters_whose_jobs_the_user_sees(
    alice, bob, admin
):
    from clusters.models import VirtualCluster

    secret = VirtualCluster.objects.create(name="secretproject")
    secret.members.add(bob)
    VirtualCluster.objects.create(name="opentoall", open_to_all=True)
    menu = 'name="vc"'
    alices = client_for(alice).get("/jobs/").content.decode()
    assert menu in alices and "<option>opentoall</option>" in alices
    assert "secretproject" not in alices
    assert "<option>secretproject</option>" in client_for(bob).get("/jobs/").content.decode()
    assert "<option>secretproject</option>" in client_for(admin).get("/jobs/").content.decode()
