"""Submitting to a virtual cluster: membership (403) and a quota the job could never fit (400)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from clusters import capacity
from clusters.models import DefaultVirtualCluster, Node, VirtualCluster
from jobs import lifecycle
from tests.clusters.helpers import cluster, job_text, vc


def test_a_user_who_is_not_a_member_gets_403(alice, bob):
    vc("research", alice, cpu=4)
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(bob, job_text("j"), virtual_cluster="research")
    assert caught.value.status == 403
    assert "bob is not a member" in str(caught.value)


def test_a_member_of_a_group_may_submit(bob):
    group = Group.objects.create(name="lab")
    bob.groups.add(group)
    vc("research", cpu=4).groups.add(group)
    job = lifecycle.submit(bob, job_text("j"), virtual_cluster="research")
    assert job.virtual_cluster.name == "research"


def test_admins_may_use_every_virtual_cluster(admin):
    vc("research", cpu=4)
    assert lifecycle.submit(admin, job_text("j"), virtual_cluster="research").id


def test_everyone_may_use_default_until_an_admin_restricts_it(alice, bob):
    assert lifecycle.submit(bob, job_text("j")).virtual_cluster.name == "default"
    VirtualCluster.objects.filter(name="default").update(open_to_all=False)
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(bob, job_text("k"))
    assert caught.value.status == 403


def test_a_job_goes_to_the_users_default_virtual_cluster(alice):
    research = vc("research", alice, cpu=4)
    DefaultVirtualCluster.objects.create(user=alice, virtual_cluster=research)
    assert lifecycle.submit(alice, job_text("j")).virtual_cluster == research


def test_without_a_default_of_their_own_a_user_gets_default_even_after_it_was_deleted(alice, bob):
    DefaultVirtualCluster.objects.create(user=bob, virtual_cluster=vc("research", bob, cpu=4))
    VirtualCluster.objects.filter(name="default").delete()
    assert lifecycle.submit(alice, job_text("j")).virtual_cluster.name == "default"
    assert lifecycle.submit(alice, job_text("k")).virtual_cluster.name == "default"
    mine = DefaultVirtualCluster.objects.create(
        user=alice, virtual_cluster=VirtualCluster.objects.get(name="default")
    )
    assert lifecycle.submit(alice, job_text("l")).virtual_cluster == mine.virtual_cluster


def test_a_virtual_cluster_named_in_the_submission_wins_over_the_users_default(alice):
    DefaultVirtualCluster.objects.create(user=alice, virtual_cluster=vc("research", alice))
    vc("lab", alice, cpu=4)
    named = lifecycle.submit(alice, job_text("j"), virtual_cluster="lab")
    assert named.virtual_cluster.name == "lab"
    named_default = lifecycle.submit(alice, job_text("k"), virtual_cluster="default")
    assert named_default.virtual_cluster.name == "default"


def test_an_unknown_virtual_cluster_gets_400_naming_it(alice):
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(alice, job_text("j"), virtual_cluster="nowhere")
    assert caught.value.status == 400
    assert "no virtual cluster named 'nowhere'" in str(caught.value)


def test_a_job_larger_than_its_guarantee_is_accepted_to_borrow_idle_room(alice):
    """It was refused outright, even on an idle cluster (issue 27): beyond its guarantee a job
    may borrow, so submit refuses only what the cluster could never hold."""
    cluster(cpu=8)
    vc("research", alice, cpu=4, gpus={"V100": 2})
    job = lifecycle.submit(alice, job_text("j", cpu=6), virtual_cluster="research")
    assert job.resources["cpu"] == 6
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(alice, job_text("k", cpu=9), virtual_cluster="research")
    assert caught.value.status == 400
    assert "needs 9 CPU in total but the cluster has 8: 1 more" in str(caught.value)


def test_a_job_beyond_its_vcs_max_capacity_gets_400_saying_by_how_much(alice):
    cluster(cpu=8)
    made = vc("research", alice, cpu=2)
    made.max_capacity = 50
    made.save()
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(alice, job_text("j", cpu=6), virtual_cluster="research")
    assert "needs 6 CPU in total but 'research' may hold at most 50% of it, 4: 2 more" in str(
        caught.value
    )


def test_a_gpu_type_the_cluster_lacks_gets_400(alice):
    vc("research", alice, gpus={"V100": 2})
    text = job_text("j", gpu=1, hivedscheduler={"taskRoles": {"main": {"gpuType": "A100"}}})
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(alice, text, virtual_cluster="research")
    assert "needs 1 GPU (A100) in total but the cluster has 0: 1 more" in str(caught.value)


def test_an_opportunistic_job_only_has_to_fit_the_cluster(alice):
    cluster(cpu=8)
    vc("research", alice, cpu=2)
    job = lifecycle.submit(
        alice, job_text("j", cpu=6, opportunistic=True), virtual_cluster="research"
    )
    assert job.opportunistic and job.resources == {
        "cpu": 6,
        "memoryMB": 64,
        "gpus": {},
        "tasks": [["main", 1, {"cpu": 6, "memoryMB": 64, "gpus": {}}]],
    }
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(
            alice, job_text("k", cpu=9, opportunistic=True), virtual_cluster="research"
        )
    assert "the cluster has 8: 1 more" in str(caught.value)


def test_priority_is_read_from_the_job(alice):
    job = lifecycle.submit(alice, job_text("j", priority=5))
    assert (job.priority, job.opportunistic) == (5, False)


def test_a_job_bigger_than_the_whole_cluster_gets_400_even_in_an_unlimited_virtual_cluster(alice):
    cluster(cpu=8, gpus={"V100": 1})
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(alice, job_text("j", gpu=2))
    assert caught.value.status == 400
    assert "needs 2 GPU in total but the cluster has 1: 1 more" in str(caught.value)


def test_a_job_within_its_quota_but_beyond_the_cluster_gets_400(alice):
    cluster(cpu=8)
    vc("research", alice, cpu=16)
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(alice, job_text("j", cpu=10), virtual_cluster="research")
    assert "needs 10 CPU in total but the cluster has 8: 2 more" in str(caught.value)


def test_with_no_node_cached_the_capacity_is_read_from_the_backend(alice, backend):
    cpus = sum(node.cpu for node in capacity.backend_nodes(backend).values())
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(alice, job_text("j", cpu=cpus + 1))
    assert f"needs {cpus + 1} CPU in total but the cluster has {cpus}: 1 more" in str(caught.value)
    assert Node.objects.get().cpu == cpus


def test_when_the_backend_cannot_report_its_capacity_nothing_is_refused_for_it(
    alice, backend, monkeypatch
):
    def unreachable():
        raise ConnectionError("the API server is down")

    monkeypatch.setattr(backend, "capacity", unreachable)
    job = lifecycle.submit(alice, job_text("j", cpu=10_000))
    assert job.resources["cpu"] == 10_000 and not Node.objects.exists()


def test_a_task_larger_than_every_node_gets_400_naming_the_role(alice):
    Node.objects.create(name="n1", cpu=2, memory_mb=64_000)
    Node.objects.create(name="n2", cpu=2, memory_mb=64_000)
    with pytest.raises(lifecycle.SubmitError) as refused:
        lifecycle.submit(alice, job_text("wide", cpu=3))  # 3 of the cluster's 4 CPUs, on no node
    assert refused.value.status == 400
    assert str(refused.value) == (
        "taskRoles.main: a task needs 3 CPU on one node, and the most any node has is 2 (n1)"
    )
    assert lifecycle.submit(alice, job_text("fits", cpu=2)).state == "WAITING"
