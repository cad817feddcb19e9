"""``GET /api/v2/virtual-clusters/<vc>/usage?hours=N``: a virtual cluster's use over time
(clusters.usage). Not in OpenPAI, whose rest-server keeps no history (its Prometheus does);
access follows the virtual cluster's own GET (rest-server routes/v2/virtual-cluster.js): a
private one is 404 to non-members, as if it did not exist."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.models import VCUsageSample, VirtualCluster
from tests.api.helpers import client_for

pytestmark = pytest.mark.django_db

URL = "/api/v2/virtual-clusters/research/usage"


@pytest.fixture
def research(alice) -> VirtualCluster:
    made = VirtualCluster.objects.create(name="research", cpu=8, gpus={"V100": 2})
    made.members.set([alice])
    return made


def at(vc: VirtualCluster, minutes_ago: float, **counts: object) -> VCUsageSample:
    when = timezone.now() - timedelta(minutes=minutes_ago)
    return VCUsageSample.objects.create(time=when, virtual_cluster=vc, **counts)


def test_usage_answers_the_points_of_the_window_oldest_first(research, alice):
    newer = at(research, 10, cpu=4, memory_mb=2048, gpus={"V100": 1, "": 1}, running=2, waiting=3)
    older = at(research, 120, cpu=1, memory_mb=512, gpus={}, running=1, waiting=0)
    at(research, 60 * 25, cpu=9)  # outside the default 24 h
    body = client_for(alice).get(URL).json()
    assert (body["name"], body["hours"], body["sampleSeconds"]) == ("research", 24, 60)
    assert body["quota"] == {"vCores": 8, "memory": None, "gpuTypes": {"V100": 2}}
    assert body["columns"] == ["time", "cpu", "memoryMB", "gpus", "running", "waiting"]
    ms = [round(s.time.timestamp() * 1000) for s in (older, newer)]
    assert body["points"] == [[ms[0], 1, 512, 0, 1, 0], [ms[1], 4, 2048, 2, 2, 3]]
    wider = client_for(alice).get(URL, {"hours": "26"}).json()
    assert [p[1] for p in wider["points"]] == [9, 1, 4] and wider["hours"] == 26


@pytest.mark.parametrize("hours", ["0", "-3", "abc", "1.5", "721", ""])
def test_a_bad_hours_is_a_400_naming_it(research, alice, hours):
    response = client_for(alice).get(URL, {"hours": hours})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "BadRequestError"
    assert body["message"].startswith("hours: a whole number of hours from 1 to 720")


def test_hours_reach_as_far_as_VC_USAGE_RETENTION_DAYS_keeps(research, alice, settings):
    settings.VC_USAGE_RETENTION_DAYS = 2
    assert client_for(alice).get(URL, {"hours": "48"}).status_code == 200
    refused = client_for(alice).get(URL, {"hours": "49"})
    assert refused.status_code == 400 and "from 1 to 48" in refused.json()["message"]


def test_a_private_virtual_clusters_usage_is_404_to_a_non_member_as_its_GET(
    research, alice, bob, admin
):
    at(research, 5, cpu=3)
    for path in (URL, "/api/v2/virtual-clusters/research"):
        response = client_for(bob).get(path)
        assert response.status_code == 404
        assert response.json()["code"] == "NoVirtualClusterError"
    assert client_for(bob).get(URL, {"hours": "x"}).status_code == 404  # not even a 400
    assert len(client_for(admin).get(URL).json()["points"]) == 1
    assert client_for(alice).get("/api/v2/virtual-clusters/nope/usage").status_code == 404


def test_usage_needs_credentials(research):
    assert client_for(None).get(URL).status_code == 401
