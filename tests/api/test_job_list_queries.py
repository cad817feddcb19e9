"""``GET /api/v2/jobs`` with OpenPAI's query parameters, and the job list page through the same
filter (jobs.filters.JobFilter)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from clusters.models import VirtualCluster
from jobs import lifecycle
from jobs.models import Job
from tests.api.helpers import client_for
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(alice, bob) -> dict[str, Job]:
    """Four jobs, alice's a1..a3 and bob's b1 in 'research', with distinct counts and times."""
    research = VirtualCluster.objects.create(name="research", open_to_all=True)
    made = {name: lifecycle.submit(alice, hello_job(name)) for name in ("a1", "a2", "a3")}
    made["b1"] = lifecycle.submit(bob, hello_job("b1"))
    now = timezone.now()
    for rank, (name, job) in enumerate(made.items()):
        Job.objects.filter(pk=job.pk).update(
            gpu_count=rank,
            task_count=10 - rank,
            retries=rank % 2,
            priority=[0, 100, 10, -1][rank],
            created_at=now + timedelta(minutes=rank),
            completed_at=None if name == "a2" else now + timedelta(hours=5 - rank),
            tags=[["x"], ["x", "y"], [], ["y"]][rank],
        )
    Job.objects.filter(name="b1").update(virtual_cluster=research)
    return made


def names(response) -> list[str]:
    body = response.json()
    rows = body["data"] if isinstance(body, dict) else body
    return [row["name"] for row in rows]


def listed(client, query: str) -> list[str]:
    response = client.get(f"/api/v2/jobs?{query}")
    assert response.status_code == 200, response.json()
    return names(response)


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("submissionTime,ASC", ["a1", "a2", "a3", "b1"]),
        ("submissionTime,DESC", ["b1", "a3", "a2", "a1"]),
        ("jobName,DESC", ["b1", "a3", "a2", "a1"]),
        ("username,DESC", ["b1", "a3", "a2", "a1"]),  # ties: newest first too
        ("vc,DESC", ["b1", "a3", "a2", "a1"]),
        ("gpuCount,DESC", ["b1", "a3", "a2", "a1"]),
        ("totalGpuNumber,ASC", ["a1", "a2", "a3", "b1"]),
        ("taskCount,ASC", ["b1", "a3", "a2", "a1"]),
        ("totalTaskNumber,DESC", ["a1", "a2", "a3", "b1"]),
        ("retries,DESC", ["b1", "a2", "a3", "a1"]),
        ("jobPriority,DESC", ["a2", "a3", "a1", "b1"]),
        ("-jobName", ["b1", "a3", "a2", "a1"]),
        ("+jobName", ["a1", "a2", "a3", "b1"]),
        ("jobName", ["a1", "a2", "a3", "b1"]),
    ],
)
def test_order_takes_openpais_field_names(alice, jobs, order, expected):
    assert listed(client_for(alice), f"order={order.replace('+', '%2B')}&username=") == expected


def test_a_plus_sent_unescaped_reads_as_ascending(alice, jobs):
    assert listed(client_for(alice), "order=+jobName")[0] == "a1"


def test_completionTime_puts_unfinished_jobs_last_going_up_and_first_going_down(alice, jobs):
    client = client_for(alice)
    assert listed(client, "order=completionTime,ASC") == ["b1", "a3", "a1", "a2"]
    assert listed(client, "order=completionTime,DESC") == ["a2", "a1", "a3", "b1"]


def test_limit_0_with_withTotalCount_answers_the_count_only(alice, jobs):
    body = client_for(alice).get("/api/v2/jobs?limit=0&withTotalCount=true").json()
    assert body == {"totalCount": 4, "data": []}
    assert client_for(alice).get("/api/v2/jobs?limit=0").json() == []


def test_offset_skips_jobs(alice, jobs):
    assert listed(client_for(alice), "order=jobName,ASC&offset=1&limit=2") == ["a2", "a3"]


def test_tagsContain_keeps_jobs_with_any_of_the_tags(alice, jobs):
    client = client_for(alice)
    assert sorted(listed(client, "tagsContain=y")) == ["a2", "b1"]
    assert sorted(listed(client, "tagsContain=x,y")) == ["a1", "a2", "b1"]


def test_tagsNotContain_drops_jobs_with_any_of_the_tags(alice, jobs):
    assert sorted(listed(client_for(alice), "tagsNotContain=x")) == ["a3", "b1"]


def test_jobPriority_takes_class_names_and_integers(alice, jobs):
    client = client_for(alice)
    assert listed(client, "jobPriority=prod") == ["a2"]
    assert sorted(listed(client, "jobPriority=default,oppo")) == ["a1", "b1"]
    assert listed(client, "jobPriority=10") == ["a3"]


def test_jobPriority_is_in_each_summary(alice, jobs):
    rows = client_for(alice).get("/api/v2/jobs?order=jobName,ASC").json()
    assert [r["jobPriority"] for r in rows] == ["default", "prod", "test", "oppo"]
    assert all("submissionTime" in r for r in rows)


def test_keyword_matches_the_job_the_user_or_the_virtual_cluster(alice, jobs):
    client = client_for(alice)
    assert listed(client, "keyword=a2") == ["a2"]
    assert listed(client, "keyword=bo") == ["b1"]
    assert listed(client, "keyword=resea") == ["b1"]


def test_state_username_and_vc_take_comma_lists(alice, jobs):
    Job.objects.filter(name="a1").update(state="SUCCEEDED")
    client = client_for(alice)
    assert sorted(listed(client, "state=SUCCEEDED,WAITING&username=alice")) == ["a1", "a2", "a3"]
    assert sorted(listed(client, "username=alice,bob&vc=research,default")) == [
        "a1", "a2", "a3", "b1"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("query", "parameter", "rule"),
    [
        ("order=-nope", "order", "must be <field>[,ASC|DESC]"),
        ("order=jobName,UP", "order", "must be <field>[,ASC|DESC]"),
        ("state=DONE", "state", "unknown state 'DONE'"),
        ("jobPriority=urgent", "jobPriority", "unknown priority 'urgent'"),
        ("withTotalCount=maybe", "withTotalCount", "valid choice"),
        ("limit=x", "limit", "whole number"),
        ("offset=-1", "offset", "greater than or equal to 0"),
        ("keyword=" + "k" * 101, "keyword", "at most 100 characters"),
        ("tagsContain=" + ",".join("t" * 101), "tagsContain", "at most 100 tags"),
    ],
)
def test_a_bad_value_is_a_400_naming_the_parameter_and_the_rule(
    alice, jobs, query, parameter, rule
):
    response = client_for(alice).get(f"/api/v2/jobs?{query}")
    assert response.status_code == 400
    message = response.json()["message"]
    assert message.startswith(f"{parameter}: ")
    assert rule in message


def test_the_list_takes_the_same_number_of_queries_for_any_number_of_jobs(
    alice, jobs, django_assert_num_queries
):
    query = (
        "/api/v2/jobs?username=alice,bob&vc=default,research&state=WAITING&keyword=a"
        "&tagsContain=x&tagsNotContain=z&jobPriority=default,prod&order=completionTime,DESC"
        "&withTotalCount=true"
    )
    client = client_for(alice)
    # the user's VCs, users, VCs, the keyword's users and VCs, the page, the retried jobs'
    # retryDetails, the count
    with django_assert_num_queries(8):
        first = client.get(query).json()
    for n in range(5):
        lifecycle.submit(alice, hello_job(f"more{n}"))
    Job.objects.filter(name__startswith="more").update(tags=["x"])
    with django_assert_num_queries(8):
        second = client.get(query).json()
    assert second["totalCount"] == first["totalCount"] + 5


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_page_uses_the_same_keyword_rule_as_the_api(alice, jobs):
    body = page_client(alice).get("/jobs/?user=&q=resea").content.decode()
    assert ">b1</a>" in body and ">a1</a>" not in body


def test_the_page_says_which_filter_it_left_out_and_why(alice, jobs):
    body = page_client(alice).get("/jobs/?user=&state=DONE").content.decode()
    assert "Left out of the filter: state: unknown state &#x27;DONE&#x27;" in body
    assert ">b1</a>" in body
