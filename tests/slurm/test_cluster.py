"""The Slurm cluster of tests/support/slurm_cluster.py is real, as the host's clients see it:
jobs span both nodes, heterogeneous jobs are placed, tasks on two nodes meet over TCP, memory
over a job's request is killed and reported, the host opens a shell in a running job with
``srun --overlap`` (with and without ``--pty``), and ``scancel`` ends jobs.

What Slurm 22.05 says, found here and asserted below (the portal's Slurm backend reads it):

- a job whose batch script goes over its memory: ``JobState=OUT_OF_MEMORY Reason=OutOfMemory
  ExitCode=0:125``; the script's output has ``Killed`` and ``slurmstepd-n1: error: Detected 1
  oom-kill event(s) in StepId=<job>.batch. Some of your processes may have been killed by the
  cgroup out-of-memory handler.``
- a step (``srun``) that goes over: srun prints ``srun: error: n1: task 0: Out Of Memory`` and
  slurmstepd's ``Detected 1 oom-kill event(s) in StepId=<job>.0``, srun exits 1, and the job
  ends as its script does (``FAILED Reason=NonZeroExitCode ExitCode=1:0`` when srun was last):
  the job's state does not say OUT_OF_MEMORY.
- plain ``scancel``: ``CANCELLED Reason=None ExitCode=0:15``. ``scancel --signal=TERM`` only
  signals, and only the steps (not the batch shell) unless ``--full``: the job then ends as its
  processes do (``FAILED``: ``JobLaunchFailure`` with ``ExitCode=0:15`` when the batch shell dies
  of it, ``NonZeroExitCode`` with ``143:0`` when it exits 143), never ``CANCELLED``.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slurm

ALLOCATE = "b = bytearray({mb} * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\n"


def job(cluster: SlurmCluster, job_id: str) -> dict[str, str]:
    """The fields of ``scontrol show job -o`` (a heterogeneous job's first component)."""
    line = cluster.client("scontrol", "show", "job", "-o", job_id).splitlines()[0]
    return dict(re.findall(r"(\S+?)=(\S*)", line))


def wait_for(cluster: SlurmCluster, job_id: str, *states: str, seconds: float = 60) -> dict:
    deadline = time.monotonic() + seconds
    while (fields := job(cluster, job_id))["JobState"] not in states:
        assert time.monotonic() < deadline, f"job {job_id} is not {states}: {fields}"
        time.sleep(0.2)
    return fields


def submit(cluster: SlurmCluster, script: str, *options: str, wait: bool = False) -> str:
    """``script`` written in the shared directory and submitted from the host; the job's id."""
    path = cluster.shared / f"script-{time.monotonic_ns()}.sh"
    path.write_text(script)
    chdir = f"--chdir={cluster.shared}"  # the default, the host's, is no directory of the nodes
    argv = ["sbatch", "--parsable", chdir, *(["--wait"] if wait else []), *options, str(path)]
    env = {**os.environ, **cluster.env}
    # sbatch --wait exits as the job did (1 for an OOM step): the id is on stdout all the same.
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.stdout.strip(), done.stderr
    return done.stdout.strip().split(";")[0]


def output(cluster: SlurmCluster, job_id: str) -> str:
    return (cluster.shared / f"{job_id}.out").read_text()


def test_host_clients_authenticate_with_the_clusters_own_munged(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """The host's clients reach the cluster through AuthInfo's socket, not /run/munge's."""
    assert "batch" in slurm_cluster.client("sinfo", "-h", "-o", "%P")
    elsewhere = tmp_path / "slurm.conf"
    conf = slurm_cluster.conf.read_text()
    elsewhere.write_text(re.sub(r"AuthInfo=socket=\S+", "AuthInfo=socket=/nowhere", conf))
    env = {**os.environ, "SLURM_CONF": str(elsewhere)}
    done = subprocess.run(["sinfo"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode != 0
    assert "/nowhere" in done.stderr


def test_a_job_runs_on_both_nodes_and_writes_to_the_shared_directory(
    slurm_cluster: SlurmCluster,
) -> None:
    out = f"{slurm_cluster.shared}/%j.out"
    job_id = submit(slurm_cluster, "#!/bin/sh\nsrun hostname\n", "-N2", "-o", out, wait=True)
    assert sorted(output(slurm_cluster, job_id).split()) == ["n1", "n2"]
    assert job(slurm_cluster, job_id)["JobState"] == "COMPLETED"


def test_a_heterogeneous_job_runs_its_components_on_different_nodes(
    slurm_cluster: SlurmCluster,
) -> None:
    """Each component takes a whole node's CPUs, so they cannot share one."""
    script = f"""#!/bin/bash
#SBATCH -o {slurm_cluster.shared}/%j.out
#SBATCH -N1 -n2 --mem-per-cpu=100
#SBATCH hetjob
#SBATCH -N1 -n2 --mem-per-cpu=100
srun --het-group=0 -n1 bash -c 'echo "0 $(hostname)"' &
srun --het-group=1 -n1 bash -c 'echo "1 $(hostname)"' &
wait
"""
    started = time.monotonic()
    job_id = submit(slurm_cluster, script, wait=True)
    print(f"heterogeneous job {job_id}: submitted to ended in {time.monotonic() - started:.1f} s")
    ran = dict(line.split() for line in output(slurm_cluster, job_id).splitlines())
    assert sorted(ran) == ["0", "1"]
    assert ran["0"] != ran["1"]
    lines = slurm_cluster.client("scontrol", "show", "job", "-o", job_id).splitlines()
    assert len(lines) == 2  # one per component: <id>+0 and <id>+1
    assert all("JobState=COMPLETED" in line and "HetJobId=" in line for line in lines)


MEET = """
import os, socket, sys, time
node_ips, port, rendezvous = {node_ips!r}, 31337, {rendezvous!r}
me = socket.gethostname()
if os.environ["SLURM_PROCID"] == "0":
    server = socket.create_server(("0.0.0.0", port))
    with open(rendezvous, "w") as f:
        f.write(me)
    conn, peer = server.accept()
    print(f"listener {{me}} got {{conn.recv(100).decode()!r}} from {{peer[0]}}", flush=True)
else:
    while not os.path.exists(rendezvous) or not open(rendezvous).read():
        time.sleep(0.1)
    listener = open(rendezvous).read()
    with socket.create_connection((node_ips[listener], port), timeout=30) as conn:
        conn.sendall(f"hello from {{me}}".encode())
    print(f"talker {{me}} reached {{listener}}", flush=True)
"""


def test_tasks_on_two_nodes_meet_over_tcp(slurm_cluster: SlurmCluster) -> None:
    rendezvous = slurm_cluster.shared / f"listener-{time.monotonic_ns()}"
    program = slurm_cluster.shared / "meet.py"
    program.write_text(MEET.format(node_ips=slurm_cluster.node_ips, rendezvous=str(rendezvous)))
    script = f"#!/bin/sh\nsrun -N2 -n2 --ntasks-per-node=1 python3 {program}\n"
    out = f"{slurm_cluster.shared}/%j.out"
    job_id = submit(slurm_cluster, script, "-N2", "-n2", "-o", out, wait=True)
    text = output(slurm_cluster, job_id)
    listener = rendezvous.read_text()
    talker = next(node for node in slurm_cluster.nodes if node != listener)
    assert f"listener {listener} got 'hello from {talker}' from " in text
    assert f"from {slurm_cluster.node_ips[talker]}" in text
    assert f"talker {talker} reached {listener}" in text


def test_a_batch_script_over_its_memory_is_killed_out_of_memory(
    slurm_cluster: SlurmCluster,
) -> None:
    script = f"#!/bin/sh\npython3 -c '{ALLOCATE.format(mb=300)}print(\"survived\")'\n"
    out = f"{slurm_cluster.shared}/%j.out"
    job_id = submit(slurm_cluster, script, "-n1", "--mem-per-cpu=100", "-o", out, wait=True)
    fields = job(slurm_cluster, job_id)
    print(f"batch over its memory: {fields['JobState']} {fields['Reason']} {fields['ExitCode']}")
    assert (fields["JobState"], fields["Reason"]) == ("OUT_OF_MEMORY", "OutOfMemory")
    assert fields["ExitCode"] == "0:125"
    text = output(slurm_cluster, job_id)
    assert "survived" not in text
    assert f"oom-kill event(s) in StepId={job_id}.batch" in text


def test_a_step_over_its_memory_is_killed_and_srun_says_so(slurm_cluster: SlurmCluster) -> None:
    """3x its request (1 CPU x 100 MB): the kernel kills it in the step's cgroup."""
    script = f"#!/bin/sh\nsrun python3 -c '{ALLOCATE.format(mb=300)}print(\"survived\")'\n"
    out = f"{slurm_cluster.shared}/%j.out"
    job_id = submit(slurm_cluster, script, "-n1", "--mem-per-cpu=100", "-o", out, wait=True)
    text = output(slurm_cluster, job_id)
    print(f"srun over its memory printed:\n{text}")
    assert "survived" not in text
    assert re.search(r"srun: error: n[12]: task 0: Out Of Memory", text)
    assert f"oom-kill event(s) in StepId={job_id}.0" in text
    fields = job(slurm_cluster, job_id)
    assert (fields["JobState"], fields["Reason"], fields["ExitCode"]) == (
        "FAILED",
        "NonZeroExitCode",
        "1:0",
    )


def test_the_host_opens_a_shell_in_a_running_job(slurm_cluster: SlurmCluster) -> None:
    """As the portal's web terminal will: ``srun --jobid --overlap`` from the host."""
    out = f"{slurm_cluster.shared}/%j.out"
    job_id = submit(slurm_cluster, "#!/bin/sh\nsleep 300\n", "-n1", "-o", out)
    try:
        node = wait_for(slurm_cluster, job_id, "RUNNING")["NodeList"]
        step = ["srun", f"--jobid={job_id}", "--overlap"]
        assert slurm_cluster.client(*step, "hostname").strip() == node
        answer = in_a_pty(slurm_cluster, [*step, "--pty", "bash", "-c", "tty; echo pty-$((6*7))"])
        print(f"srun --overlap --pty answered: {answer!r}")
        assert "/dev/pts/" in answer
        assert "pty-42" in answer
    finally:
        slurm_cluster.client("scancel", job_id)


def in_a_pty(cluster: SlurmCluster, argv: list[str]) -> str:
    """What ``argv`` writes on a pseudo-terminal that is its stdin, stdout and stderr."""
    leader, follower = os.openpty()
    env = {**os.environ, **cluster.env}
    terminal = {"stdin": follower, "stdout": follower, "stderr": follower}
    with subprocess.Popen(argv, **terminal, env=env, cwd=cluster.shared) as p:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert p.wait(timeout=60) == 0, b"".join(chunks)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_scancel_ends_a_running_job_as_cancelled(slurm_cluster: SlurmCluster) -> None:
    out = f"{slurm_cluster.shared}/%j.out"
    job_id = submit(slurm_cluster, "#!/bin/sh\nsleep 300\n", "-n1", "-o", out)
    wait_for(slurm_cluster, job_id, "RUNNING")
    slurm_cluster.client("scancel", job_id)
    fields = wait_for(slurm_cluster, job_id, "CANCELLED")
    assert (fields["Reason"], fields["ExitCode"]) == ("None", "0:15")


def test_scancel_signal_term_reaches_the_batch_shell_with_full(
    slurm_cluster: SlurmCluster,
) -> None:
    """``--signal`` only signals: the job ends as its script does on SIGTERM, here exit 143."""
    ready = slurm_cluster.shared / "trap-set"
    script = f"#!/bin/bash\ntrap 'echo got TERM; exit 143' TERM\ntouch {ready}\nsleep 300 &\nwait\n"
    out = f"{slurm_cluster.shared}/%j.out"
    job_id = submit(slurm_cluster, script, "-n1", "-o", out)
    wait_for(slurm_cluster, job_id, "RUNNING")
    deadline = time.monotonic() + 60
    while not ready.exists():  # RUNNING comes before the script has set its trap
        assert time.monotonic() < deadline, "the batch script never set its trap"
        time.sleep(0.1)
    slurm_cluster.client("scancel", "--full", "--signal=TERM", job_id)
    fields = wait_for(slurm_cluster, job_id, "FAILED", "CANCELLED")
    assert (fields["JobState"], fields["ExitCode"]) == ("FAILED", "143:0")
    assert "got TERM" in output(slurm_cluster, job_id)
