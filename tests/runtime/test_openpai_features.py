"""Jobs of our own that use each feature OpenPAI's example and marketplace jobs use
(``tests/runtime/openpai_features/``, each naming the example it stands for), submitted
through OpenPAI's REST API (``POST /api/v2/jobs``) to the local backend and run to their end.
The commands check, inside the task, the names and values OpenPAI's runtime gives and fail
with ``OpenPAI check failed - ...`` otherwise; the tests check what the tasks printed.

The v1 job (``v1_job.json``) stands for OpenPAI's v1 examples (``examples/*/*.json``:
``jobName``, ``image``, ``taskRoles`` with ``taskNumber``, ``portList`` and ``command``,
``jobEnvs``, ``retryCount``).

What the local backend cannot do is named where it is met: it pulls no image (every job
runs its commands on this machine whatever ``dockerimage`` says, so a dockerimage's
``auth`` is accepted and kept secret but never used), and a machine without GPUs never
runs a job that asks for some: it is refused at submit, naming them (the GPU job runs here
with a fake ``nvidia-smi``, and checks what it is given, not CUDA)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rest_framework.test import APIClient

from clusters import capacity
from clusters.models import Storage
from jobs.models import Job, Task
from jobs.states import JobState
from tests.jobs.helpers import settle

pytestmark = pytest.mark.django_db(transaction=True)


FEATURES = Path(__file__).with_name("openpai_features")


def submit(user, name: str, **fill: str) -> Job:
    """POST a feature job as OpenPAI's clients do (YAML, or v1 JSON), with ``@KEY@`` filled."""
    text = (FEATURES / name).read_text()
    for key, value in fill.items():
        text = text.replace(f"@{key}@", value)
    client = APIClient()
    client.force_authenticate(user)
    kind = "application/json" if name.endswith(".json") else "text/yaml"
    response = client.post("/api/v2/jobs", text, content_type=kind)
    assert response.status_code == 202, response.content
    document = yaml.safe_load(text)
    return Job.objects.get(owner=user, name=document.get("name") or document["jobName"])


def outputs(backend, job: Job, stream: str = "stdout") -> dict[str, list[str]]:
    """Each task's lines of ``stream``, by role-index."""
    return {
        f"{task.role}-{task.index}": backend.read_log(task.backend_ref, stream)
        .decode()
        .splitlines()
        for task in Task.objects.filter(attempt__job=job).order_by("role", "index")
    }


def run(backend, job: Job, timeout: float = 90) -> dict[str, list[str]]:
    """Run ``job`` to its end; its tasks' stdout (stderr says why when it did not succeed)."""
    job = settle(backend, job, timeout)
    assert job.state == JobState.SUCCEEDED, (job.reason, outputs(backend, job, "stderr"))
    return outputs(backend, job)


def api_job(user, job: Job) -> dict:
    client = APIClient()
    client.force_authenticate(user)
    response = client.get(f"/api/v2/jobs/{user.username}~{job.name}")
    assert response.status_code == 200
    return response.json()


def test_a_parameter_server_and_workers_find_each_other(alice, backend):
    logs = run(backend, submit(alice, "ps_worker.yaml"))
    ps = Task.objects.get(attempt__job__name="feature_ps_worker", role="ps_server")
    ps_host = f"{ps.ip}:{ps.ports['http'][0]}"
    for i in (0, 1):
        assert logs[f"worker-{i}"] == [
            f"worker {i} of 2 checked; ps at {ps_host}",
            f"ps says welcome {i}",
        ]
    assert logs["ps_server-0"] == ["ps served 2 workers"]


def test_prerequisites_and_a_deployment_run_with_their_references(alice, backend):
    logs = run(backend, submit(alice, "prerequisites_deployment.yaml"))
    assert logs["trainer-0"] == [
        "cloned https://git.example.org/carol/benchmarks at 0a1b2c3 by carol",
        "upload trained on digits to hdfs://10.0.0.1:9000/models/digits",
    ]


def test_parameters_and_secrets_are_substituted(alice, backend):
    job = submit(alice, "parameters_secrets.yaml")
    logs = run(backend, job)
    assert logs["main-0"] == [
        *(f"step {n} of resnet20 batch 32" for n in (1, 2, 3)),
        "secret of 16 characters substituted",
    ]
    # The image's auth is accepted with its secret masked; the local backend pulls nothing.
    config = APIClient()
    config.force_authenticate(alice)
    text = config.get(f"/api/v2/jobs/alice~{job.name}/config").content.decode()
    assert "regis-try-pass" not in text and "Z2l0aHViLXRva2Vu" not in text


def test_a_labelled_port_is_served_where_openpai_names_it(alice, backend):
    job = submit(alice, "ports_serving.yaml")
    logs = run(backend, job)
    task = Task.objects.get(attempt__job=job)
    assert logs["server-0"] == [f"served prediction 7 on {task.ports['model_server'][0]}"]
    assert len(task.ports["model_server"]) == 2


def test_a_master_reaches_its_worker_by_name_over_ssh_and_its_success_ends_the_job(alice, backend):
    job = submit(alice, "horovod_ssh.yaml")
    logs = run(backend, job, timeout=120)
    worker = Task.objects.get(attempt__job=job, role="worker")
    assert logs["master-0"] == [f"master reached worker-0 on {worker.ip}"]
    assert worker.state == "STOPPED"  # the master's success ended the sleeping worker


def test_task_retries_and_a_role_whose_failures_do_not_count(alice, backend, shared):
    job = submit(alice, "retries_completion.yaml", SHARED=str(shared))
    logs = run(backend, job)
    assert logs["flaky-0"] == ["flaky 0 succeeded"]
    assert logs["flaky-1"] == ["flaky 1 succeeded"]
    assert logs["optional-1"][0] == "optional 1 ends with 4"
    roles = api_job(alice, job)["taskRoles"]
    flaky = {t["taskIndex"]: t for t in roles["flaky"]["taskStatuses"]}
    assert (flaky[1]["retries"], flaky[1]["accountableRetries"]) == (1, 1)
    assert [t["taskState"] for t in roles["optional"]["taskStatuses"]] == ["SUCCEEDED", "FAILED"]
    assert api_job(alice, job)["jobStatus"]["retries"] == 0


FAKE_TENSORBOARD = """#!/bin/sh
case "$1" in --version_tb) echo 2.15.1; exit 0 ;; esac
echo "$@" > "$(dirname "$0")/../tensorboard.args"
exec sleep 300
"""


def test_extras_storage_tensorboard_hived_and_submit_from_are_accepted_and_run(
    alice, backend, shared, tmp_path
):
    share = tmp_path / "team_share"
    share.mkdir(mode=0o777)
    share.chmod(0o777)  # the task's uid writes in it
    Storage.objects.create(name="team_share", path=str(share), open_to_all=True)
    (shared / "bin").mkdir(parents=True)
    (shared / "bin" / "tensorboard").write_text(FAKE_TENSORBOARD)
    (shared / "bin" / "tensorboard").chmod(0o755)
    shared.chmod(0o777)
    job = submit(alice, "extras_plugins.yaml", SHARED=str(shared))
    logs = run(backend, job)
    assert logs["main-0"] == [
        "wrote to the team storage",
        "--logdir=/mnt/tensorboard --bind_all --port=11449",
    ]
    assert (share / "0.txt").read_text() == "model of alice~feature_extras\n"
    stderr = outputs(backend, job, "stderr")["main-0"]
    assert "[portal] tensorboard: started on port 11449" in "\n".join(stderr)


def test_a_v1_job_runs_with_openpais_v1_names(alice, backend):
    logs = run(backend, submit(alice, "v1_job.json"))
    assert logs == {f"train-{i}": [f"v1 task {i} of 2 checked"] for i in (0, 1)}


@pytest.mark.usefixtures("two_gpus")
def test_a_gpu_job_gets_its_gpu_as_openpais_runtime_names_it(alice, backend):
    """On a machine that reports GPUs (a fake ``nvidia-smi``: this one has none, and a job
    asking for more GPUs than the cluster has is refused at submit, naming them)."""
    capacity.refresh(backend)
    job = submit(alice, "gpu_job.yaml")
    logs = run(backend, job)
    task = Task.objects.get(attempt__job=job)
    assert logs["worker-0"] == ["would run python examples/mnist/main.py --epochs 1 on GPU 0"], (
        task.diagnostics
    )


# What OpenPAI's examples write and the portal refuses, each with the rule that says so:
# (file, text replaced, by, the field our 400 names).
REFUSED = {
    # marketplace-v2/tensorflow-serving-mnist.yaml: OpenPAI's own rest-server schema
    # (protocol.js, and openpai-protocol's schema.yaml) has jobRetryCount minimum 0 too.
    "always_retry": (
        "ports_serving.yaml",
        "jobRetryCount: 0",
        "jobRetryCount: -2",
        "jobRetryCount",
    ),
    # The same example's "model_server: 0": seed 000 says a port count is no less than 1.
    "zero_ports": (
        "ports_serving.yaml",
        "model_server: 2",
        "model_server: 0",
        "ports.model_server",
    ),
    # Any GPU example on a cluster without GPUs: it could never start, so it is refused at
    # once rather than left waiting (OpenPAI leaves its pods pending).
    "no_gpu_here": ("gpu_job.yaml", "", "", "GPU"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_what_openpais_examples_write_and_the_portal_refuses_is_named(alice, case):
    name, old, new, field = REFUSED[case]
    text = (FEATURES / name).read_text().replace(old, new) if old else (FEATURES / name).read_text()
    client = APIClient()
    client.force_authenticate(alice)
    response = client.post("/api/v2/jobs", text, content_type="text/yaml")
    assert response.status_code == 400
    assert field in response.json()["message"]
