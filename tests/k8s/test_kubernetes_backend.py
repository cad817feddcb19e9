"""The Kubernetes backend against a fake API server: a job's whole life, faults included."""

from __future__ import annotations

import pytest

from backends.base import Placement, TaskLaunch, TaskPhase, TaskShape
from backends.kubernetes.api import KubernetesUnavailable
from backends.kubernetes.backend import KubernetesBackend
from tests.support.fake_cluster import FakeCluster, strings

KEY = "job7-a0"
SHAPES = [
    TaskShape("ps_server", 0, cpu=1, memory_mb=512, gpu=0, port_counts={"http": 1, "ssh": 1}),
    TaskShape("worker", 0, cpu=4, memory_mb=8192, gpu=2, port_counts={"nccl": 2}),
    TaskShape("worker", 1, cpu=4, memory_mb=8192, gpu=2, port_counts={"nccl": 2}),
]
LIST_PODS = ("GET", "/api/v1/namespaces/default/pods")


def launch_all(k8s: KubernetesBackend, key: str = KEY, **extra: object) -> list[str]:
    refs = []
    for shape, placement in zip(SHAPES, k8s.place(key, SHAPES), strict=True):
        refs.append(k8s.launch(launch_of(key, shape, placement, **extra)))
    return refs


def launch_of(key: str, shape: TaskShape, placement: Placement, **extra: object) -> TaskLaunch:
    return TaskLaunch(
        attempt_key=key,
        role=shape.role,
        index=shape.index,
        retry=0,
        script=f"#!/bin/sh\necho {shape.role}-{shape.index}\n",
        env={"PAI_HOST_IP_worker_0": "worker-0.pai-job7-a0"},
        placement=placement,
        cpu=shape.cpu,
        memory_mb=shape.memory_mb,
        gpu=shape.gpu,
        image="python:3.11",
        shm_mb=256,
        gpu_type="V100" if shape.gpu else "",
        **extra,  # type: ignore[arg-type]
    )


def name_of(ref: str) -> str:
    return ref.rpartition("/")[2]


def test_placement_names_each_task_in_the_attempts_service_with_fixed_ports(k8s):
    placements = k8s.place(KEY, SHAPES)
    assert [p.ip for p in placements] == [
        "ps-server-0.pai-job7-a0",
        "worker-0.pai-job7-a0",
        "worker-1.pai-job7-a0",
    ]
    assert placements[0].ports == {"http": [20000], "ssh": [20001]}
    assert placements[1].ports == {"nccl": [20000, 20001]}


def test_roles_that_would_share_a_dns_name_get_distinct_ones(k8s):
    shapes = [TaskShape("a_b", 0, 1, 1, 0), TaskShape("a-b", 0, 1, 1, 0)]
    first, second = (p.ip.split(".")[0] for p in k8s.place(KEY, shapes))
    assert first != second
    assert first.startswith("a-b-") and second.startswith("a-b-")


def test_launch_creates_a_headless_service_scripts_and_owned_pods(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    service = cluster.objects[("services", "default", "pai-job7-a0")]
    assert service["spec"]["clusterIP"] == "None"
    pod = cluster.objects[("pods", "default", name_of(refs[1]))]
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    assert (spec["hostname"], spec["subdomain"]) == ("worker-0", "pai-job7-a0")
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"pool": "jobs", "gpu-portal/gpu-type": "V100"}
    assert container["command"] == ["/bin/sh", "/pai/bootstrap.sh"]
    limits = {"cpu": "4", "memory": "8192Mi", "nvidia.com/gpu": "2"}
    assert container["resources"] == {"requests": limits, "limits": limits}
    assert [p["containerPort"] for p in container["ports"]] == [20000, 20001]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}} in spec[
        "volumes"
    ]
    assert pod["metadata"]["labels"]["gpu-portal/job"] == "job7"
    assert pod["metadata"]["labels"]["gpu-portal/role"] == "worker"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == service["metadata"]["uid"]
    script = cluster.objects[("secrets", "default", name_of(refs[1]))]
    assert strings(script)["bootstrap.sh"] == "#!/bin/sh\necho worker-0\n"


def test_launching_the_same_task_twice_is_harmless(k8s, cluster: FakeCluster):
    first = launch_all(k8s)
    assert launch_all(k8s) == first
    assert len(cluster.pods()) == 3


def test_registry_credentials_become_an_image_pull_secret(k8s, cluster: FakeCluster):
    auth = {"registry": "registry.example.com", "username": "alice", "password": "s3cret"}
    refs = launch_all(k8s, pull_secret=auth)
    pod = cluster.objects[("pods", "default", name_of(refs[0]))]
    (pull,) = pod["spec"]["imagePullSecrets"]
    secret = cluster.objects[("secrets", "default", pull["name"])]
    assert secret["type"] == "kubernetes.io/dockerconfigjson"


def test_a_job_through_its_whole_life(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    ps, worker0, worker1 = (name_of(r) for r in refs)
    unschedulable = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    cluster.set_status(worker0, pending_condition("Unschedulable", unschedulable))
    cluster.set_status(worker1, waiting("ImagePullBackOff", 'Back-off pulling image "python:3.11"'))
    seen = k8s.observe(refs)
    assert seen[refs[0]].phase == TaskPhase.PENDING
    assert seen[refs[1]].diagnostics == f"Unschedulable: {unschedulable}"
    assert seen[refs[2]].diagnostics.startswith("ImagePullBackOff: Back-off pulling")

    cluster.set_status(ps, running("10.1.2.3", "node-a"))
    cluster.set_status(worker0, running("10.1.2.4", "node-b"))
    cluster.set_status(worker1, terminated("Failed", 137, "OOMKilled", "node-b"))
    seen = k8s.observe(refs)
    assert (seen[refs[0]].phase, seen[refs[0]].ip, seen[refs[0]].node) == (
        TaskPhase.RUNNING,
        "10.1.2.3",
        "node-a",
    )
    oom = seen[refs[2]]
    assert (oom.phase, oom.exit_code) == (TaskPhase.FAILED, 137)
    assert oom.diagnostics.startswith("OOMKilled: killed by signal 9 (SIGKILL)")
    assert oom.finished_at is not None

    cluster.set_status(ps, terminated("Succeeded", 0, "Completed", "node-a"))
    cluster.set_status(worker0, terminated("Failed", 3, "Error", "node-b"))
    seen = k8s.observe(refs)
    assert (seen[refs[0]].phase, seen[refs[0]].exit_code) == (TaskPhase.SUCCEEDED, 0)
    assert (seen[refs[1]].phase, seen[refs[1]].exit_code) == (TaskPhase.FAILED, 3)
    assert seen[refs[1]].diagnostics == "Error: exited with code 3"
    assert cluster.requests[LIST_PODS] == 3  # one list call per pass, not one per task


def test_an_evicted_pod_fails_with_the_kubelets_reason(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    message = "The node was low on resource: memory."
    cluster.set_status(
        name_of(refs[0]), {"phase": "Failed", "reason": "Evicted", "message": message}
    )
    seen = k8s.observe(refs[:1])[refs[0]]
    assert (seen.phase, seen.exit_code, seen.diagnostics) == (
        TaskPhase.FAILED,
        None,
        f"Evicted: {message}",
    )


def test_a_429_storm_is_waited_out_as_long_as_the_server_asks(k8s, cluster: FakeCluster, sleeps):
    refs = launch_all(k8s)
    cluster.set_status(name_of(refs[0]), running("10.1.2.3", "node-a"))
    cluster.fail_next(4, 429, retry_after="2")
    assert k8s.observe(refs)[refs[0]].phase == TaskPhase.RUNNING
    assert sleeps == [2.0, 2.0, 2.0, 2.0]  # the Retry-After, not a backoff of our own


def test_a_retry_after_beyond_the_cap_waits_the_cap(k8s, cluster: FakeCluster, sleeps):
    refs = launch_all(k8s)
    cluster.fail_next(1, 429, retry_after="120")
    k8s.observe(refs)
    assert sleeps == [5.0]


def test_without_retry_after_the_backoff_grows_with_full_jitter(k8s, cluster: FakeCluster, sleeps):
    refs = launch_all(k8s)
    cluster.fail_next(5, 503)  # no Retry-After
    assert k8s.observe(refs)[refs[0]].phase == TaskPhase.PENDING
    assert len(sleeps) == 5
    # Each delay is uniform in [0, min(cap, base * 2**failures)]: 0.2, 0.4, 0.8, 1.6, 3.2.
    assert all(0 <= delay <= min(5.0, 0.2 * 2**n) for n, delay in enumerate(sleeps))
    assert sum(sleeps) > 0  # a real wait, not a retry storm of our own


def test_server_errors_are_retried_too(k8s, cluster: FakeCluster):
    cluster.fail_next(2, 503)
    refs = launch_all(k8s)
    assert len(cluster.pods()) == 3 and len(refs) == 3


def test_a_dropped_connection_is_retried(k8s, cluster: FakeCluster, sleeps):
    refs = launch_all(k8s)
    cluster.fail_next(1, 0)
    assert k8s.observe(refs)[refs[0]].phase == TaskPhase.PENDING
    assert len(sleeps) == 1


def test_an_endless_storm_raises_instead_of_losing_tasks(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    cluster.fail_next(50, 429)
    with pytest.raises(KubernetesUnavailable, match="list pods: HTTP 429"):
        k8s.observe(refs)  # never "GONE": the pass fails, the next one tries again


def test_other_api_errors_are_not_retried(k8s, cluster: FakeCluster, sleeps):
    cluster.fail_next(1, 403)
    with pytest.raises(Exception, match="403"):
        launch_all(k8s)
    assert sleeps == []


def test_stop_deletes_the_attempt_and_its_tasks_are_then_gone(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    other = launch_all(k8s, key="job8-a0")
    k8s.stop(refs)
    assert {o.phase for o in k8s.observe(refs).values()} == {TaskPhase.GONE}
    kinds = {key[0] for key in cluster.objects if "job7" in key[2]}
    assert kinds == set()  # service, secrets and pods all went
    assert k8s.observe(other)[other[0]].phase == TaskPhase.PENDING
    k8s.stop(refs)  # stopping again is harmless


def test_cleanup_removes_attempts_that_are_not_live(k8s, cluster: FakeCluster):
    launch_all(k8s, key="job1-a0")
    live = launch_all(k8s, key="job2-a0")
    assert k8s.cleanup({"job2-a0"}) == ["job1-a0"]
    assert set(cluster.pods()) == {name_of(r) for r in live}


def test_read_log_returns_the_pods_log_and_its_tail(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    name = name_of(refs[0])
    assert k8s.read_log(refs[0], "stdout") == b""  # still pending
    cluster.set_status(name, running("10.1.2.3", "node-a"))
    cluster.logs[name] = b"".join(b"line %d\n" % i for i in range(1000))
    assert k8s.read_log(refs[0], "stdout").startswith(b"line 0\n")
    assert k8s.read_log(refs[0], "stdout", tail_bytes=8) == b"ine 999\n"
    assert k8s.read_log(refs[0], "stdout", tail_bytes=2000) == cluster.logs[name][-2000:]
    assert k8s.read_log(refs[0], "stderr") == b""  # Kubernetes interleaves both streams


def test_read_log_head_asks_for_the_start_of_the_pods_log_only(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    name = name_of(refs[0])
    cluster.set_status(name, running("10.1.2.3", "node-a"))
    cluster.logs[name] = b"".join(b"line %d\n" % i for i in range(1000))
    assert k8s.read_log_head(refs[0], "stdout", 14) == b"line 0\nline 1\n"
    assert k8s.read_log_head(refs[0], "stderr", 14) == b""  # it is in stdout


def test_capacity_sums_the_schedulable_nodes_jobs_may_use(k8s, cluster: FakeCluster):
    cluster.nodes = [
        node("a", {"pool": "jobs", "gpu-portal/gpu-type": "V100"}, "7800m", "32Gi", "4"),
        node("b", {"pool": "jobs", "gpu-portal/gpu-type": "A100"}, "16", "65536Mi", "8"),
        node("c", {"pool": "jobs"}, "4", "8Gi", None),
        node("d", {"pool": "system"}, "64", "256Gi", "8"),
        node("e", {"pool": "jobs"}, "64", "256Gi", "8", unschedulable=True),
    ]
    capacity = k8s.capacity()
    assert (capacity.cpu, capacity.memory_mb) == (27, (32 + 64 + 8) * 1024)
    assert capacity.gpus == {"V100": 4, "A100": 8}


def test_each_node_jobs_may_use_is_listed_with_its_own_capacity(k8s, cluster: FakeCluster):
    from backends.base import Capacity, SupportsNodes

    cluster.nodes = [
        node("a", {"pool": "jobs", "gpu-portal/gpu-type": "V100"}, "7800m", "32Gi", "4"),
        node("b", {"pool": "jobs"}, "16", "65536Mi", "8"),
        node("c", {"pool": "jobs"}, "4", "8Gi", None),
        node("d", {"pool": "system"}, "64", "256Gi", "8"),
        node("e", {"pool": "jobs"}, "64", "256Gi", "8", unschedulable=True),
    ]
    assert isinstance(k8s, SupportsNodes)
    assert k8s.nodes() == {
        "a": Capacity(cpu=7, memory_mb=32 * 1024, gpus={"V100": 4}),
        "b": Capacity(cpu=16, memory_mb=64 * 1024, gpus={"gpu": 8}),
        "c": Capacity(cpu=4, memory_mb=8 * 1024, gpus={}),
    }


@pytest.mark.django_db
def test_the_node_table_holds_the_clusters_real_nodes(k8s, cluster: FakeCluster):
    from clusters.capacity import refresh

    cluster.nodes = [  # bigger than the 64 CPUs and 256 GB every test's cluster has at least
        node("gpu-1", {"pool": "jobs", "gpu-portal/gpu-type": "A100"}, "96", "512Gi", "8"),
        node("cpu-1", {"pool": "jobs"}, "128", "300Gi", None),
    ]
    stored = {n.name: (n.cpu, n.memory_mb, n.gpus) for n in refresh(k8s)}
    assert stored == {"gpu-1": (96, 512 * 1024, {"A100": 8}), "cpu-1": (128, 300 * 1024, {})}


# -- pod statuses as the kubelet and the scheduler write them ----------------------------------


def pending_condition(reason: str, message: str) -> dict[str, object]:
    condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
    return {"phase": "Pending", "conditions": [condition]}


def waiting(reason: str, message: str) -> dict[str, object]:
    state = {"waiting": {"reason": reason, "message": message}}
    return {"phase": "Pending", "nodeName": "node-b", "containerStatuses": [main(state)]}


def running(ip: str, node_name: str) -> dict[str, object]:
    state = {"running": {"startedAt": "2026-01-02T03:04:05Z"}}
    return {"phase": "Running", "podIP": ip, "nodeName": node_name,
            "containerStatuses": [main(state)]}  # fmt: skip


def terminated(phase: str, code: int, reason: str, node_name: str) -> dict[str, object]:
    state = {"terminated": {"exitCode": code, "reason": reason,
                            "startedAt": "2026-01-02T03:04:05Z",
                            "finishedAt": "2026-01-02T03:14:05Z"}}  # fmt: skip
    return {"phase": phase, "nodeName": node_name, "containerStatuses": [main(state)]}


def main(state: dict[str, object]) -> dict[str, object]:
    return {"name": "main", "state": state, "ready": "running" in state, "restartCount": 0}


def node(
    name: str,
    labels: dict[str, str],
    cpu: str,
    memory: str,
    gpus: str | None,
    unschedulable: bool = False,
) -> dict[str, object]:
    allocatable = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": gpus} if gpus else {})}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": allocatable},
    }


def test_a_terminal_is_a_shell_with_a_tty_over_a_pod_exec_stream(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    cluster.set_status(name_of(refs[0]), running("10.1.2.3", "node-a"))
    session = k8s.shell(refs[0])
    out = b""
    while not out.endswith(b"$ "):
        out += session.read(2) or b""
    assert out == f"{name_of(refs[0])}$ ".encode()
    session.resize(120, 40)
    session.write(b"echo hi\r")
    while b"hi\r\n" not in out:
        out += session.read(2) or b""
    session.write(b"exit\r")
    while (data := session.read(2)) != b"":
        out += data or b""
    session.close()
    (opened,) = cluster.execs
    assert opened.query["tty"] == ["true"] and opened.query["container"] == ["main"]
    assert opened.query["command"][:2] == ["/bin/sh", "-c"]
    assert "/pai/env.sh" in opened.query["command"][2]
    assert opened.resizes == [{"Width": 120, "Height": 40}]


def test_no_terminal_opens_into_a_pod_that_is_gone(k8s, cluster: FakeCluster):
    assert k8s.shell("job7-a0/pai-job7-a0-nothing-0") is None


def test_the_terminals_shell_reads_the_tasks_environment_from_its_secret(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    secret = cluster.objects[("secrets", "default", name_of(refs[0]))]
    assert strings(secret)["env.sh"] == "export PAI_HOST_IP_worker_0=worker-0.pai-job7-a0\n"
    pod = cluster.objects[("pods", "default", name_of(refs[0]))]
    (volume,) = (v for v in pod["spec"]["volumes"] if v["name"] == "bootstrap")
    assert {"key": "env.sh", "path": "env.sh", "mode": 0o444} in volume["secret"]["items"]


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (None, "does not have a host assigned"),  # not scheduled yet
        ({"phase": "Pending", "nodeName": "node-a"}, 'container not found ("main")'),
        ("succeeded", "cannot exec into a container in a completed pod"),
    ],
)
def test_no_shell_into_a_pod_that_is_not_running_and_the_log_says_why(
    k8s, cluster: FakeCluster, caplog, status, why
):
    ref = launch_all(k8s)[0]
    if status == "succeeded":
        cluster.set_status(name_of(ref), terminated("Succeeded", 0, "Completed", "node-a"))
    elif status:
        cluster.set_status(name_of(ref), status)
    assert k8s.shell(ref) is None
    assert cluster.execs == []  # the server refused the upgrade
    assert why in caplog.text


def test_the_exec_stream_speaks_v5_channel_k8s_io(k8s, cluster: FakeCluster):
    ref = launch_all(k8s)[0]
    cluster.set_status(name_of(ref), running("10.1.2.3", "node-a"))
    session = k8s.shell(ref)
    assert session is not None
    try:
        (opened,) = cluster.execs
        assert opened.protocol == "v5.channel.k8s.io"  # the first of the client's list
    finally:
        session.close()


def test_observing_a_few_tasks_of_many_reads_them_by_name_instead_of_listing(
    k8s, cluster: FakeCluster
):
    refs = [r for key in range(40) for r in launch_all(k8s, key=f"job{key}-a0")]  # 120 pods
    k8s.observe(refs)  # everything: one list
    assert cluster.requests[LIST_PODS] == 1
    cluster.set_status(name_of(refs[7]), running("10.1.2.3", "node-a"))
    cluster.delete("pods", "default", name_of(refs[8]))  # never scheduled: gone at once
    seen = k8s.observe(refs[7:9])  # a wake-up for two changed tasks
    assert cluster.requests[LIST_PODS] == 1  # no second list
    assert cluster.requests[("GET", f"/api/v1/namespaces/default/pods/{name_of(refs[7])}")] == 1
    assert seen[refs[7]].phase == TaskPhase.RUNNING and seen[refs[7]].ip == "10.1.2.3"
    assert seen[refs[8]].phase == TaskPhase.GONE
