"""Task files kept out of the script, storages as volumes, and debug pods kept, on the fake."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import kubernetes_validate
import pytest
from test_kubernetes_backend import KEY, SHAPES, launch_all, launch_of, name_of, running

from backends.base import StorageMount
from backends.kubernetes import manifests as m
from backends.kubernetes.backend import KubernetesBackend
from tests.support.fake_cluster import FakeCluster, strings

KEY_TEXT = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n-----END OPENSSH PRIVATE KEY-----\n"
FILES = {".ssh/id_job": KEY_TEXT}
PVC = StorageMount("datasets", "pvc", claim_name="datasets-claim", read_only=True)
NFS = StorageMount("home", "nfs", path="/export/home", server="nfs.example.com")
LOCAL = StorageMount("scratch", "local-dir", path="/srv/scratch")


def valid(manifest: dict[str, object]) -> None:
    kubernetes_validate.validate(manifest, desired_version="1.30", strict=True)


def test_task_files_live_in_the_tasks_secret_and_are_mounted_not_scripted(
    k8s: KubernetesBackend, cluster: FakeCluster
):
    refs = launch_all(k8s, files=FILES)
    name = name_of(refs[0])
    secret = cluster.objects[("secrets", "default", name)]
    assert strings(secret)[m.file_key(".ssh/id_job")] == KEY_TEXT
    assert "PRIVATE KEY" not in strings(secret)["bootstrap.sh"]
    pod = cluster.objects[("pods", "default", name)]
    (volume,) = (v for v in pod["spec"]["volumes"] if v["name"] == "bootstrap")
    assert volume["secret"]["items"] == [
        {"key": "bootstrap.sh", "path": "bootstrap.sh", "mode": 0o555},
        {"key": "env.sh", "path": "env.sh", "mode": 0o444},  # for the terminal's shells
        {"key": m.file_key(".ssh/id_job"), "path": "files/.ssh/id_job", "mode": 0o400},
    ]
    env = pod["spec"]["containers"][0]["env"]
    assert {"name": "PAI_FILES_DIR", "value": "/pai/files"} in env
    for manifest in cluster.created:
        valid(manifest)


def test_without_files_only_the_script_and_its_environment_are_mounted(k8s, cluster: FakeCluster):
    pod = cluster.objects[("pods", "default", name_of(launch_all(k8s)[0]))]
    (volume,) = (v for v in pod["spec"]["volumes"] if v["name"] == "bootstrap")
    assert [i["path"] for i in volume["secret"]["items"]] == ["bootstrap.sh", "env.sh"]
    assert all(e["name"] != "PAI_FILES_DIR" for e in pod["spec"]["containers"][0]["env"])


def test_a_file_path_leaving_the_work_dir_is_refused(k8s, cluster: FakeCluster):
    with pytest.raises(ValueError, match="relative file path"):
        launch_all(k8s, files={"../etc/passwd": "x"})
    assert cluster.pods() == {}


def test_pvc_and_nfs_storages_are_volumes_at_mnt_name(k8s, cluster: FakeCluster):
    refs = launch_all(k8s, storages=[PVC, NFS])
    pod = cluster.objects[("pods", "default", name_of(refs[1]))]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["storage-0"]["persistentVolumeClaim"] == {
        "claimName": "datasets-claim",
        "readOnly": True,
    }
    assert volumes["storage-1"]["nfs"] == {
        "server": "nfs.example.com",
        "path": "/export/home",
        "readOnly": False,
    }
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "storage-0", "mountPath": "/mnt/datasets", "readOnly": True} in mounts
    assert {"name": "storage-1", "mountPath": "/mnt/home", "readOnly": False} in mounts
    for manifest in cluster.created:
        valid(manifest)


def test_a_local_dir_storage_is_refused_with_a_reason_and_nothing_is_created(
    k8s, cluster: FakeCluster
):
    with pytest.raises(m.LaunchRefused, match="'scratch' is a directory on the portal's machine"):
        launch_all(k8s, storages=[LOCAL])
    assert cluster.created == []


def test_a_local_dir_storage_is_a_host_path_when_the_admin_allows_it(apiserver, cluster):
    from kubernetes import client

    from backends.kubernetes.api import api_client_for

    api = api_client_for(client.Configuration(host=apiserver[0]))
    options = m.K8sOptions(allow_host_path_storage=True)
    refs = launch_all(KubernetesBackend(api, options), storages=[LOCAL])
    pod = cluster.objects[("pods", "default", name_of(refs[0]))]
    (volume,) = (v for v in pod["spec"]["volumes"] if v["name"] == "storage-0")
    assert volume["hostPath"] == {"path": "/srv/scratch", "type": "Directory"}
    valid(pod)
    api.close()


@pytest.mark.parametrize(
    ("store", "reason"),
    [
        (StorageMount("x", "pvc"), "without a claim name"),
        (StorageMount("x", "nfs", server="s"), "without a server and an absolute path"),
        (StorageMount("x", "s3"), "unknown kind"),
    ],
)
def test_an_incomplete_storage_is_refused(k8s, store, reason):
    with pytest.raises(m.LaunchRefused, match=reason):
        launch_all(k8s, storages=[store])


# -- debug: a failed pod of a debug job stays until its keep time is over ----------------------


def failed_at(when: datetime) -> dict[str, object]:
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    state = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": stamp}}
    return {"phase": "Failed", "containerStatuses": [{"name": "main", "state": state}]}


def test_a_debug_jobs_failed_pod_survives_stop_and_cleanup_until_its_keep_time(
    k8s: KubernetesBackend, cluster: FakeCluster
):
    refs = launch_all(k8s, debug_keep_hours=24)
    names = [name_of(r) for r in refs]
    pod = cluster.objects[("pods", "default", names[1])]
    assert pod["metadata"]["annotations"][m.DEBUG_KEEP_HOURS] == "24"
    cluster.set_status(names[0], running("10.0.0.1", "node-a"))
    cluster.set_status(names[1], failed_at(datetime.now(UTC)))
    k8s.stop(refs)  # the job failed: the other tasks are stopped
    assert "deletionTimestamp" in cluster.pods()[names[0]]["metadata"]
    cluster.advance(3600)  # past the grace period of the running pod
    assert set(cluster.pods()) == {names[1]}
    assert ("secrets", "default", names[1]) in cluster.objects  # still mounted by the pod
    assert ("services", "default", m.service_name(KEY)) in cluster.objects  # its owner
    assert k8s.cleanup(set()) == [KEY]
    assert set(cluster.pods()) == {names[1]}  # within its keep time

    cluster.set_status(names[1], failed_at(datetime.now(UTC) - timedelta(hours=25)))
    assert k8s.cleanup(set()) == [KEY]
    assert not [key for key in cluster.objects if KEY in key[2]]  # everything went


def test_failed_pods_of_other_jobs_go_with_their_attempt(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    cluster.set_status(name_of(refs[1]), failed_at(datetime.now(UTC)))
    k8s.stop(refs)
    assert cluster.pods() == {}


def test_the_debug_annotation_is_only_on_debug_jobs(k8s, cluster: FakeCluster):
    launch = launch_of(KEY, SHAPES[0], k8s.place(KEY, SHAPES)[0])
    pod = cluster.objects[("pods", "default", name_of(k8s.launch(launch)))]
    assert m.DEBUG_KEEP_HOURS not in pod["metadata"]["annotations"]
