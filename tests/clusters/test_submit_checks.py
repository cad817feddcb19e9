"""Submitting to a virtual cluster: membership (403) and a quota the job could never fit (400)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from clusters.models import DefaultVirtualCluster, VirtualCluster
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


def test_a_job_larger_than_the_quota_gets_400_saying_by_how_much(alice):
    vc("research", alice, cpu=4, gpus={"V100": 2})
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(alice, job_text("j", cpu=6), virtual_cluster="research")
    assert caught.value.status == 400
    assert "needs 6 CPU in total but 'research' guarantees 4: 2 more" in str(caught.value)


def test_a_gpu_type_the_quota_lacks_gets_400(alice):
    vc("research", alice, gpus={"V100": 2})
    text = job_text("j", gpu=1, hivedscheduler={"taskRoles": {"main": {"gpuType": "A100"}}})
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(alice, text, virtual_cluster="research")
    assert "needs 1 GPU (A100) in total but 'research' guarantees 0: 1 more" in str(caught.value)


def test_an_opportunistic_job_only_has_to_fit_the_cluster(alice):
    cluster(cpu=8)
    vc("research", alice, cpu=2)
    job = lifecycle.submit(
        alice, job_text("j", cpu=6, opportunistic=True), virtual_cluster="research"
    )
    assert job.opportunistic and job.resources == {"cpu": 6, "memoryMB": 64, "gpus": {}}
    with pytest.raises(lifecycle.SubmitError) as caught:
        lifecycle.submit(
            alice, job_text("k", cpu=9, opportunistic=True), virtual_cluster="research"
        )
    assert "the cluster has 8: 1 more" in str(caught.value)


def test_priority_is_read_from_the_job(alice):
    job = lifecycle.submit(alice, job_text("j", priority=5))
    assert (job.priority, job.opportunistic) == (5, False)
