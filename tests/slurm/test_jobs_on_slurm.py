"""OpenPAI jobs end to end on a real Slurm cluster (``tests/support/slurm_cluster.py``: a
controller and two nodes in containers, this machine their submit host) through the portal's
own submit, reconcile passes and Slurm backend: tasks meet across nodes over TCP, fail,
retry, stop, hit their memory limit, wait for Slurm, log and open a terminal."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import AbstractBaseUser

from backends.base import BackendUnavailable, Capacity, Observation, TaskPhase, TerminalSession
from backends.slurm.backend import SlurmBackend
from backends.slurm.commands import SlurmClient
from clusters import capacity
from jobs import lifecycle
from jobs.lifecycle.passes import run_pass
from jobs.models import Job, Task
from jobs.states import FINAL_JOB_STATES, JobState, TaskState
from tests.runtime.test_openpai_features import outputs
from tests.runtime.test_openpai_features import submit as submit_feature
from tests.support.compose import BUILDER, run
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

# The server listens on its own port; the client finds it by its peer's variables.
SERVER = """python3 -c "import socket, os; s = socket.socket()
s.bind(('', int(os.environ['PAI_CONTAINER_HOST_PORT']))); s.listen()
c, _ = s.accept(); print(c.recv(100).decode(), flush=True)"
"""
CLIENT = """python3 -c "import socket, os, time
for _ in range(300):
    try:
        c = socket.create_connection((os.environ['PAI_HOST_IP_server_0'],
            int(os.environ['PAI_PORT_LIST_server_0_http'])))
        break
    except OSError:
        time.sleep(0.1)
c.sendall(('hello from ' + os.uname().nodename).encode())"
"""


@pytest.fixture
def slurm(slurm_cluster, tmp_path: Path) -> Iterator[SlurmBackend]:
    root = slurm_cluster.shared / tmp_path.name  # a directory of its own per test
    backend = SlurmBackend(
        root, SlurmClient(str(slurm_cluster.conf)), slurm_cluster.partition, stop_grace_seconds=3
    )
    yield backend
    backend.cleanup([])  # cancels what a failed test left running


def run_until(backend: SlurmBackend, job: Job, done, seconds: float = 180) -> Job:
    """Reconcile passes (what the portal's worker runs) until ``done(job)`` holds; failing at
    once, with what Slurm and the tasks said, when the job ended otherwise."""
    deadline = time.monotonic() + seconds
    while True:
        run_pass(backend)
        job.refresh_from_db()
        if done(job):
            return job
        if job.state in FINAL_JOB_STATES or time.monotonic() > deadline:
            pytest.fail(f"{job} is {job.state}: {job.reason}\n{said_by(backend, job)}")
        time.sleep(0.5)


def said_by(backend: SlurmBackend, job: Job) -> str:
    """The batch scripts' output and the tasks' stderr, to say why a job went wrong."""
    said = []
    for attempt in job.attempts.all():
        for out in sorted((backend.root / attempt.key).glob("**/slurm-*.out")):
            said.append(f"{out.name}: {out.read_text()[-2000:]}")
    for name, task in tasks_of(job).items():
        said.append(f"{name}: {backend.read_log(task.backend_ref, 'stderr').decode()[-2000:]}")
    return "\n".join(said)


def answer(shell: TerminalSession | None, line: bytes, until: bytes) -> bytes:
    """What a terminal printed after ``line`` was typed, up to ``until``; closed after."""
    assert shell is not None
    try:
        shell.write(line)
        said = b""
        deadline = time.monotonic() + 60
        while until not in said:
            assert time.monotonic() < deadline, said
            said += shell.read(1) or b""
        return said
    finally:
        shell.close()


def finished(job: Job) -> bool:
    return job.state in FINAL_JOB_STATES


def tasks_of(job: Job) -> dict[str, Task]:
    return {f"{t.role}-{t.index}": t for t in Task.objects.filter(attempt__job=job)}


def role(
    commands: list[str],
    instances: int = 1,
    cpu: int = 1,
    memory_mb: int = 128,
    gpu: int = 0,
    ports: dict[str, int] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One task role of a job run on the nodes' own system."""
    resources: dict[str, Any] = {"cpu": cpu, "memoryMB": memory_mb, "gpu": gpu}
    if ports:
        resources["ports"] = ports
    spec = {"instances": instances, "dockerImage": "node", "resourcePerInstance": resources}
    return {**spec, "commands": commands, **extra}


def submit(user: AbstractBaseUser, name: str, **roles: dict[str, Any]) -> Job:
    image = {"name": "node", "type": "dockerimage", "uri": "debian:12"}
    protocol = {"protocolVersion": 2, "name": name, "type": "job", "prerequisites": [image]}
    return lifecycle.submit(user, yaml.safe_dump({**protocol, "taskRoles": roles}))


def test_two_roles_meet_over_tcp_across_the_two_nodes(alice, slurm: SlurmBackend) -> None:
    # Each task asks for both CPUs of a node: Slurm must place the roles on different nodes.
    job = submit(
        alice,
        "meet",
        server=role([SERVER], cpu=2, memory_mb=256, ports={"http": 1}),
        client=role(["env | sort", CLIENT], cpu=2, memory_mb=256),
    )
    job = run_until(slurm, job, finished)
    tasks = tasks_of(job)
    said = {
        name: slurm.read_log(t.backend_ref, "stderr").decode()[-2000:] for name, t in tasks.items()
    }
    assert job.state == JobState.SUCCEEDED, (job.reason, said)
    server, client = tasks["server-0"], tasks["client-0"]
    assert {server.node, client.node} == {"n1", "n2"}
    said = slurm.read_log(server.backend_ref, "stdout").decode()
    assert f"hello from {client.node}" in said
    port = server.ports["http"][0]
    assert 30000 <= port < 50000
    env = slurm.read_log(client.backend_ref, "stdout").decode()
    assert f"PAI_HOST_IP_server_0={server.ip}" in env
    assert f"PAI_PORT_LIST_server_0_http={port}" in env
    # The job starts with none of the portal's variables (its database, its secret key).
    assert "DATABASE_URL" not in env and "SECRET_KEY" not in env


def test_a_failing_task_ends_the_job_by_its_completion_policy(alice, slurm) -> None:
    commands = ['if [ "$PAI_TASK_INDEX" = 0 ]; then echo broken >&2; exit 3; fi', "sleep 300"]
    job = submit(
        alice, "fails", worker=role(commands, instances=2, completion={"minFailedInstances": 1})
    )
    job = run_until(slurm, job, finished)
    assert job.state == JobState.FAILED
    tasks = tasks_of(job)
    assert (tasks["worker-0"].state, tasks["worker-0"].exit_code) == (TaskState.FAILED, 3)
    # The job ends at once; its other task is stopped by the next passes.
    run_until(slurm, job, lambda j: tasks_of(j)["worker-1"].state == TaskState.STOPPED, 60)
    assert "broken" in slurm.read_log(tasks["worker-0"].backend_ref, "stderr").decode()


def test_a_failed_task_is_run_again_alone_as_a_job_of_its_own(alice, slurm) -> None:
    commands = [
        "if [ ! -e ../first-run ]; then touch ../first-run; exit 1; fi",
        "echo second run on $(hostname)",
    ]
    job = submit(alice, "retries", worker=role(commands, taskRetryCount=1))
    job = run_until(slurm, job, finished)
    assert job.state == JobState.SUCCEEDED, job.reason
    task = tasks_of(job)["worker-0"]
    assert task.retries == 1 and task.backend_ref.endswith("/worker-0-r1")
    assert "second run on" in slurm.read_log(task.backend_ref, "stdout").decode()


def test_stop_terminates_the_slurm_job_with_its_grace(alice, slurm) -> None:
    commands = [
        "trap 'echo got TERM; exit 143' TERM",
        "echo running",
        "while :; do sleep 0.2; done",
    ]
    job = submit(alice, "stops", worker=role(commands, instances=2))
    run_until(slurm, job, lambda j: all(t.state == TaskState.RUNNING for t in tasks_of(j).values()))
    ref = tasks_of(job)["worker-0"].backend_ref
    run_until(slurm, job, lambda j: b"running" in slurm.read_log(ref, "stdout"))
    assert lifecycle.stop(job, alice)
    job = run_until(slurm, job, finished, seconds=60)
    assert job.state == JobState.STOPPED
    for task in tasks_of(job).values():
        assert (task.state, task.exit_code) == (TaskState.STOPPED, 143)
        assert b"got TERM" in slurm.read_log(task.backend_ref, "stdout")


def test_a_task_over_its_memory_is_killed_and_says_so(alice, slurm) -> None:
    hungry = 'python3 -c "b = bytearray(400 * 2**20); import time; time.sleep(30)"'
    job = submit(alice, "hungry", worker=role([hungry], memory_mb=100))
    job = run_until(slurm, job, finished)
    assert job.state == JobState.FAILED
    task = tasks_of(job)["worker-0"]
    assert task.state == TaskState.FAILED
    assert "OOM kill" in task.diagnostics, task.diagnostics  # the wrapper read its cgroup
    assert "memory" in (task.exit_spec or {}).get("reason", ""), task.exit_spec


def test_the_terminal_opens_in_a_task_and_a_job_slurm_holds_says_why(
    alice, slurm, slurm_cluster
) -> None:
    one = role(["echo up", "sleep 300"])
    first = submit(alice, "one", worker=one)
    run_until(slurm, first, lambda j: tasks_of(j)["worker-0"].state == TaskState.RUNNING)
    task = tasks_of(first)["worker-0"]
    shell = slurm.shell(task.backend_ref)
    said = answer(
        shell,
        b"echo role=$PAI_CURRENT_TASK_ROLE_NAME node=$(hostname) pwd=$PWD\n",
        b"node=" + task.node.encode(),
    )
    assert b"role=worker" in said and task.backend_ref.encode() in said

    # Another user of the cluster takes the rest of it: Slurm holds the next job, though the
    # portal, which knows only its own jobs, admits it; the task says why in words. The other
    # job runs in /tmp (the test's directory is not on the nodes: a job that cannot open its
    # output fails at once), and the next job goes in once the other runs.
    client = SlurmClient(str(slurm_cluster.conf))
    sbatch = ["sbatch", "--parsable", "--ntasks=3", "--chdir=/tmp", "--wrap=sleep 300"]
    other = client.run(sbatch).strip()
    try:
        squeue = ["squeue", "-h", "-j", other, "-o", "%T"]
        wait_for(lambda: client.run(squeue).strip() == "RUNNING", timeout=60, step=0.2)
        second = submit(alice, "second", worker=one)
        run_until(
            slurm,
            second,
            lambda j: "Slurm: waiting" in tasks_of(j)["worker-0"].diagnostics,
        )
        assert "(Resources)" in tasks_of(second)["worker-0"].diagnostics
    finally:
        client.signal([other])
    run_until(slurm, second, lambda j: tasks_of(j)["worker-0"].state == TaskState.RUNNING)
    for job in (first, second):
        lifecycle.stop(job, alice)
        run_until(slurm, job, finished, seconds=60)


def test_the_watch_wakes_on_a_task_publishing_and_ending_and_nodes_come_from_sinfo(
    alice, slurm
) -> None:
    assert slurm.nodes() == {
        "n1": Capacity(2, 1000, {"tesla": 2}),
        "n2": Capacity(2, 1000, {"tesla": 2}),
    }
    assert slurm.capacity() == Capacity(4, 2000, {"tesla": 4})
    seen: list[Observation] = []
    stop = threading.Event()
    watcher = threading.Thread(
        target=lambda: seen.extend(
            obs for batch in slurm.watch(stop) for obs in batch.observations.values()
        )
    )
    watcher.start()
    try:
        job = submit(alice, "watched", worker=role(["sleep 1"]))
        run_until(slurm, job, finished)
    finally:
        stop.set()
        watcher.join(10)
    ref = tasks_of(job)["worker-0"].backend_ref
    phases = [obs.phase for obs in seen if obs.ref == ref]
    assert TaskPhase.SUCCEEDED in phases, seen  # the end, seen by the watch, not only by a pass
    assert TaskPhase.RUNNING in phases  # its address published


def test_a_virtual_cluster_runs_in_its_own_partition(alice, slurm) -> None:
    slurm.vc_partitions = {"default": "nowhere"}
    job = run_until(slurm, submit(alice, "placed", worker=role(["echo placed"])), finished)
    task = tasks_of(job)["worker-0"]
    assert job.state == JobState.FAILED
    assert "Slurm refused the job" in task.diagnostics and "partition" in task.diagnostics

    slurm.vc_partitions = {"default": "batch"}
    job = run_until(slurm, submit(alice, "again", worker=role(["echo placed"])), finished)
    assert job.state == JobState.SUCCEEDED, job.reason
    attempt = slurm.root / job.attempts.get().key
    assert "#SBATCH --partition=batch" in (attempt / "job.sh").read_text()


def test_a_hostile_task_reads_and_overwrites_nothing_of_the_portals_machine_through_links(
    alice, slurm, tmp_path: Path
) -> None:
    # Files of the portal's machine, not of the nodes: a task can only name them in links
    # left in its own directory, which the portal then reads or writes.
    secret = tmp_path / "secret"
    secret.write_text("the portal's secret")
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    fake = tmp_path / "fake-task"
    fake.mkdir()
    (fake / "stdout.log").write_text("the portal's secret")
    commands = [
        f"mv stdout.log real.log && ln -s {secret} stdout.log",
        "mv stderr.log real-err.log && mkfifo stderr.log",  # a reader of it would hang
        f"ln -s {victim} .stop.tmp && ln -s {victim} .peers.env.tmp",
        "touch ready",
        "sleep 300",
    ]
    job = submit(alice, "hostile", worker=role(commands), other=role(["sleep 300"]))
    run_until(
        slurm,
        job,
        lambda j: (slurm.work_dir(tasks_of(j)["worker-0"].backend_ref) / "ready").exists(),
    )
    ref = tasks_of(job)["worker-0"].backend_ref
    assert slurm.read_log(ref, "stdout") == b""
    assert slurm.read_log(ref, "stderr") == b""
    assert list(slurm.log_chunks(ref, "stdout")) == []
    slurm.publish_peers(ref, {"PAI_X": "1"})  # onto the link's name, not through it
    assert lifecycle.stop(job, alice)
    job = run_until(slurm, job, finished, seconds=60)
    assert victim.read_text() == "untouched"
    # Its directory swapped for a link to a directory of the portal's machine: nothing read.
    directory = slurm.work_dir(ref)
    directory.rename(directory.with_name("moved"))
    directory.symlink_to(fake)
    assert slurm.read_log(ref, "stdout") == b""
    slurm.publish_peers(ref, {"PAI_X": "1"})
    slurm.stop([ref])
    assert sorted(p.name for p in fake.iterdir()) == ["stdout.log"]  # nothing written there


ACCOUNTS = {"alice": ("slurmalice", 23001), "bob": ("slurmbob", 23002)}


@pytest.fixture
def accounts(slurm: SlurmBackend, slurm_cluster) -> Iterator[dict[str, str]]:
    """Two accounts of the cluster, by the same ids on every node and on this submit host (as
    a site's directory gives them), for alice and bob; the host's are removed after."""
    added = []
    for name, uid in ACCOUNTS.values():
        for node in ["ctl", *slurm_cluster.nodes]:
            slurm_cluster.exec(node, ["sh", "-c", f"id -u {name} || useradd -u {uid} -U -M {name}"])
        if subprocess.run(["id", "-u", name], capture_output=True, check=False).returncode:
            subprocess.run(["useradd", "-u", str(uid), "-U", "-M", name], check=True)
            added.append(name)
    slurm.accounts = {user: name for user, (name, _) in ACCOUNTS.items()}
    yield slurm.accounts
    for name in added:
        subprocess.run(["userdel", name], check=True)


def test_each_users_jobs_run_as_their_own_account_and_cannot_touch_anothers(
    alice, bob, slurm, accounts, client
) -> None:
    bobs = submit(bob, "bobs", worker=role(["echo bob-secret > mine", "sleep 300"]))
    run_until(slurm, bobs, lambda j: tasks_of(j)["worker-0"].state == TaskState.RUNNING)
    bob_task = tasks_of(bobs)["worker-0"]
    bob_dir = slurm.work_dir(bob_task.backend_ref)
    bob_job = (bob_dir.parent / "slurm-job").read_text().strip()
    assert (bob_dir.stat().st_uid, bob_dir.stat().st_mode & 0o777) == (23002, 0o700)

    # Alice's task tries bob's files, his job and the attempt's records; then it leaves
    # records of its own in its directory, naming root and bob's job, for the portal to trust.
    root = '{"name": "root", "uid": 0, "gid": 0}'
    commands = [
        "id -u",
        f"cat {bob_dir}/mine {bob_dir}/bootstrap.sh; echo read=$?",
        f"scancel {bob_job}; echo cancel=$?",
        f"touch {bob_dir.parent}/planted; echo plant=$?",
        f"""echo '{{"role": "worker", "retry": 0, "account": {root}}}' > launch.json""",
        f"echo {bob_job} > slurm-job; cp slurm-job worker-0.slurm-job",
        "echo planted",
        "sleep 300",
    ]
    alices = submit(alice, "alices", worker=role(commands))
    run_until(
        slurm,
        alices,
        lambda j: b"planted" in slurm.read_log(tasks_of(j)["worker-0"].backend_ref, "stdout"),
    )
    ref = tasks_of(alices)["worker-0"].backend_ref
    said = slurm.read_log(ref, "stdout").decode()
    assert said.splitlines()[0] == "23001"
    assert "read=1" in said and "plant=1" in said and "cancel=0" not in said, said
    assert "bob-secret" not in said
    # Her terminal is still her account's, and stopping her job stops hers, not bob's.
    answer(slurm.shell(ref), b"echo uid=$(id -u)\n", b"uid=23001")
    lifecycle.stop(alices, alice)
    run_until(slurm, alices, finished, seconds=60)
    run_until(slurm, bobs, lambda j: True)
    assert tasks_of(bobs)["worker-0"].state == TaskState.RUNNING

    # Bob's terminal is a shell of his account; his job page says whose.
    answer(slurm.shell(bob_task.backend_ref), b"echo uid=$(id -u)\n", b"uid=23002")
    assert slurm.runs_as("bob") == "the account slurmbob"
    lifecycle.stop(bobs, bob)
    run_until(slurm, bobs, finished, seconds=60)


@pytest.mark.parametrize(
    "feature",
    [
        "horovod_ssh.yaml",  # ssh from one node's task into another's, by name
        "ps_worker.yaml",
        "ports_serving.yaml",
        "parameters_secrets.yaml",
        "prerequisites_deployment.yaml",
        "retries_completion.yaml",
        "v1_job.json",
    ],
)
def test_openpais_feature_jobs_run_on_slurm(alice, slurm, feature: str) -> None:
    """The feature jobs that the local backend runs (tests/runtime/test_openpai_features.py),
    through OpenPAI's REST API, on the nodes: their commands check what OpenPAI's runtime
    gives a task and fail with ``OpenPAI check failed`` otherwise. Left out: the GPU job (no
    GPU here) and the storage plugin's (Slurm mounts no storage: refused at launch)."""
    job = submit_feature(alice, feature, SHARED=str(slurm.root))
    job = run_until(slurm, job, finished)
    assert job.state == JobState.SUCCEEDED, (job.reason, said_by(slurm, job), outputs(slurm, job))


def test_a_task_gets_its_gpus_from_slurm(alice, slurm) -> None:
    """The nodes' GPUs are gres (tests/support/slurm_cluster.py: devices with no driver); a
    task asking for two gets both of a node, as ``--gpus-per-task``, and OpenPAI's count."""
    capacity.refresh(slurm)  # what beat does: the portal learns the nodes' GPUs from sinfo
    commands = ['echo "gpus=$SLURM_JOB_GPUS count=$PAI_CURRENT_TASK_ROLE_GPU_COUNT"']
    job = run_until(slurm, submit(alice, "gpus", worker=role(commands, gpu=2)), finished)
    assert job.state == JobState.SUCCEEDED, (job.reason, said_by(slurm, job))
    ref = tasks_of(job)["worker-0"].backend_ref
    assert slurm.read_log(ref, "stdout").decode().split() == ["gpus=0,1", "count=2"]
    assert "--gpus-per-task=2" in (slurm.root / ref.split("/")[0] / "job.sh").read_text()


WATCH_SECONDS = 120


def test_a_task_whose_wrapper_died_with_no_exit_code_wakes_the_watch(alice, slurm) -> None:
    # The task kills its own wrapper (the parent of its bootstrap): no exit code is written,
    # the step ends, and the batch script's last lines leave the task's file in .ended.
    kill = "kill -9 $(awk '{print $4}' /proc/$PPID/stat)"
    job = submit(alice, "orphan", worker=role(["sleep 2", kill, "sleep 300"]))
    run_until(slurm, job, lambda j: tasks_of(j)["worker-0"].state == TaskState.RUNNING)
    ref = tasks_of(job)["worker-0"].backend_ref
    stop = threading.Event()
    timer = threading.Timer(WATCH_SECONDS, stop.set)
    timer.start()
    seen = None
    try:
        for batch in slurm.watch(stop):  # no pass runs meanwhile: only a file can wake this
            seen = batch.observations.get(ref, seen)
            if seen is not None and seen.phase == TaskPhase.FAILED:
                break
    finally:
        timer.cancel()
    assert seen is not None and seen.phase == TaskPhase.FAILED, "the watch never saw it end"
    assert "step ended before the task recorded an exit code" in seen.diagnostics
    run_until(slurm, job, finished)


def test_while_the_controller_is_down_passes_change_nothing_and_the_job_then_ends(
    alice, slurm, slurm_cluster
) -> None:
    job = submit(alice, "outage", worker=role(["sleep 5", "echo survived"]))
    run_until(slurm, job, lambda j: tasks_of(j)["worker-0"].state == TaskState.RUNNING)
    slurm.client.timeout = 20
    controller = slurm_cluster.containers["ctl"]
    run([BUILDER, "stop", controller])
    try:
        with pytest.raises(BackendUnavailable):
            run_pass(slurm)
        time.sleep(6)  # the task ends on its node meanwhile (slurmd keeps it running)
        with pytest.raises(BackendUnavailable):
            run_pass(slurm)
        job.refresh_from_db()
        assert job.state == JobState.RUNNING
        assert tasks_of(job)["worker-0"].state == TaskState.RUNNING
    finally:
        run([BUILDER, "start", controller])
    deadline = time.monotonic() + 120
    while True:  # until the controller answers again
        try:
            slurm.client.queue()
            break
        except BackendUnavailable:
            assert time.monotonic() < deadline, slurm_cluster.logs("ctl")
            time.sleep(1)
    job = run_until(slurm, job, finished)
    assert job.state == JobState.SUCCEEDED, (job.reason, said_by(slurm, job))
    assert b"survived" in slurm.read_log(tasks_of(job)["worker-0"].backend_ref, "stdout")


def test_peers_meet_through_wake_up_passes_that_see_only_who_just_published(alice, slurm) -> None:
    """As ``watchcluster`` drives the portal: each wake-up pass observes only the tasks whose
    files just appeared, so the task that published first is not in the pass that completes
    its attempt's addresses, and must be handed its peers all the same."""
    job = submit(
        alice,
        "woken",
        server=role(["echo server at $PAI_CONTAINER_HOST_PORT"], ports={"http": 1}),
        client=role(["echo client sees $PAI_HOST_IP_server_0:$PAI_PORT_LIST_server_0_http"]),
    )
    run_pass(slurm)  # the full pass that launches them
    stop = threading.Event()
    timer = threading.Timer(WATCH_SECONDS, stop.set)
    timer.start()
    try:
        for batch in slurm.watch(stop):
            run_pass(slurm, changed=list(batch.observations))
            job.refresh_from_db()
            if job.state in FINAL_JOB_STATES:
                break
    finally:
        timer.cancel()
    assert job.state == JobState.SUCCEEDED, (job.reason, said_by(slurm, job))
    server = tasks_of(job)["server-0"]
    said = slurm.read_log(tasks_of(job)["client-0"].backend_ref, "stdout").decode()
    assert f"client sees {server.ip}:{server.ports['http'][0]}" in said
