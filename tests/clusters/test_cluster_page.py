"""The cluster at a glance (/cluster/, issue 28): nodes, GPUs per type, virtual clusters' use
against their guarantees and their queues, as OpenPAI's home page shows them to every user
(microsoft/pai src/webportal/src/app/home/home/gpu-chart.jsx, virtual-cluster-statistics.jsx)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Node
from jobs import lifecycle
from jobs.models import Job, JobAttempt, Task
from tests.clusters.helpers import cluster, job_text, vc

pytestmark = pytest.mark.django_db


def gpu_job(name: str, gpus: int, kind: str = "", instances: int = 1, cpu: int = 1) -> str:
    """A job of role ``main`` whose instances ask ``gpus`` GPUs of type ``kind`` each."""
    extras = {"hivedscheduler": {"taskRoles": {"main": {"gpuType": kind}}}} if kind else {}
    data = json.loads(job_text(name, cpu=cpu, gpu=gpus, memory_mb=1000, **extras))
    data["taskRoles"]["main"]["instances"] = instances
    return json.dumps(data)


def run_on(job: Job, *nodes: str) -> Job:
    """Mark ``job`` running with its task ``main-<i>`` on ``nodes[i]``, as the backend would."""
    attempt = JobAttempt.objects.create(job=job, number=0, key=f"k-{job.id}")
    for index, node in enumerate(nodes):
        Task.objects.create(attempt=attempt, role="main", index=index, state="RUNNING", node=node)
    Job.objects.filter(id=job.id).update(state="RUNNING", queue_position=None)
    return job


def page_of(client: Any, user: Any) -> str:
    client.force_login(user)
    response = client.get("/cluster/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_cluster_page_shows_each_nodes_gpus_of_two_types_used_and_free(client, alice):
    cluster(cpu=16, memory_mb=64_000, gpus={"V100": 4})
    Node.objects.create(name="node-2", cpu=32, memory_mb=128_000, gpus={"A100": 8})
    vc("research", alice, open_to_all=True)
    # Two instances of 2 V100 each on node-1; 3 untyped GPUs on node-2 count as its A100s.
    run_on(lifecycle.submit(alice, gpu_job("v", 2, "V100", instances=2, cpu=2)), *["node-1"] * 2)
    run_on(lifecycle.submit(alice, gpu_job("a", 3)), "node-2")
    page = page_of(client, alice)
    assert "V100: 4 used / 4 (0 free)" in page
    assert "A100: 3 used / 8 (5 free)" in page
    assert "4 used / 16 (12 free)" in page  # node-1's CPU: two instances of 2
    assert "2000 used / 64000 (62000 free)" in page
    assert "1 used / 32 (31 free)" in page
    totals = page.split('id="gpu-totals"')[1].split("</table>")[0]
    assert '<tr id="gpus-A100"><td>A100</td><td>8</td><td>3</td><td>5</td></tr>' in totals
    assert '<tr id="gpus-V100"><td>V100</td><td>4</td><td>4</td><td>0</td></tr>' in totals
    assert "5 used / 48 (43 free)" in page  # the "all nodes" line: CPU over both nodes


def test_a_job_spread_over_two_nodes_counts_one_instance_on_each(client, alice):
    cluster(cpu=8, gpus={"V100": 4})
    Node.objects.create(name="node-2", cpu=8, memory_mb=64_000, gpus={"V100": 4})
    run_on(lifecycle.submit(alice, gpu_job("wide", 1, "V100", instances=2)), "node-1", "node-2")
    page = page_of(client, alice)
    for node in ("node-1", "node-2"):
        row = page.split(f'id="node-{node}"')[1].split("</tr>")[0]
        assert "V100: 1 used / 4 (3 free)" in row


def test_a_private_virtual_cluster_is_hidden_from_a_non_member_and_shown_to_an_admin(
    client, alice, bob, admin
):
    cluster(cpu=8, gpus={"V100": 4})
    vc("research", alice, cpu=4, gpus={"V100": 2})
    job = lifecycle.submit(alice, gpu_job("train", 1, "V100"), virtual_cluster="research")
    run_on(job, "node-1")
    bobs = page_of(client, bob)
    assert 'id="vc-default"' in bobs and "research" not in bobs
    for user in (alice, admin):
        page = page_of(client, user)
        section = page.split('id="vc-research"')[1].split("</section>")[0]
        assert "GPU (V100)" in section and "1 used / 2 guaranteed / 4 total" in section


def test_the_queue_length_of_each_virtual_cluster_is_shown(client, alice):
    cluster(cpu=8)
    vc("research", alice, cpu=1)
    for name in ("j1", "j2", "j3"):
        lifecycle.submit(alice, job_text(name), virtual_cluster="research")
    run_on(lifecycle.submit(alice, job_text("r1"), virtual_cluster="research"), "node-1")
    page = page_of(client, alice)
    assert "<td>1</td><td>3</td></tr>" in page.split('id="queue-research"')[1]
    assert "<td>0</td><td>0</td></tr>" in page.split('id="queue-default"')[1]


def test_no_other_users_job_name_is_shown_to_a_non_admin(client, alice, bob):
    cluster(cpu=8, gpus={"V100": 4})
    vc("shared", alice, bob, cpu=4)
    lifecycle.submit(alice, job_text("secret-plan"), virtual_cluster="shared")
    run_on(lifecycle.submit(alice, gpu_job("secret-run", 1, "V100")), "node-1")
    page = page_of(client, bob)
    assert "secret-plan" not in page and "secret-run" not in page
    assert "V100: 1 used / 4 (3 free)" in page  # the use is shown, as a number
    assert "<td>0</td><td>1</td></tr>" in page.split('id="queue-shared"')[1]


def test_the_cluster_page_takes_as_many_queries_for_many_nodes_and_jobs_as_for_one(
    client, alice, bob
):
    cluster(cpu=64, memory_mb=640_000, gpus={"V100": 8})
    vc("research", alice, open_to_all=True)
    client.force_login(bob)

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert client.get("/cluster/").status_code == 200
        return len(seen)

    run_on(lifecycle.submit(alice, job_text("first")), "node-1")
    one = queries()
    for i in range(2, 7):
        Node.objects.create(name=f"node-{i}", cpu=8, memory_mb=64_000, gpus={"A100": 2})
        run_on(lifecycle.submit(alice, gpu_job(f"job-{i}", 1, instances=2)), f"node-{i}", "node-1")
        lifecycle.submit(alice, job_text(f"waits-{i}"), virtual_cluster="research")
    assert queries() == one


def test_the_cluster_page_is_for_signed_in_users(client):
    response = client.get("/cluster/")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_untyped_gpus_on_a_node_of_two_types_are_shown_as_of_any_type(client, alice):
    Node.objects.create(name="mixed", cpu=8, memory_mb=64_000, gpus={"A100": 4, "T4": 2})
    run_on(lifecycle.submit(alice, gpu_job("any", 3)), "mixed")
    page = page_of(client, alice)
    row = page.split('id="node-mixed"')[1].split("</tr>")[0]
    assert "of any type: 3 used" in row and "A100: 0 used / 4 (4 free)" in row
    assert "<td>–</td><td>3</td><td>–</td>" in page.split('id="gpus-any"')[1]
