"""The web terminal on Kubernetes: the real ASGI app's terminal consumer, a pod exec stream into
the fake API server's tiny shell, and the same messages and endings as on the local backend."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from test_kubernetes_backend import running

from jobs import lifecycle, terminal
from jobs.lifecycle.passes import run_pass
from jobs.models import Task
from jobs.states import TaskState
from tests.jobs.helpers import settle
from tests.jobs.samples import hello_job
from tests.jobs.test_terminal import open_terminal, read_until, refused
from tests.support.fake_cluster import FakeCluster

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


@pytest.fixture(autouse=True)
def _terminals_open_on_the_fake_cluster(k8s, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terminal, "get_backend", lambda: k8s)


@database_sync_to_async
def running_pod(alice, k8s, cluster: FakeCluster) -> Task:
    job = lifecycle.submit(alice, hello_job("term", command="sleep 60"))
    run_pass(k8s)
    task = Task.objects.get(attempt__job=job)
    cluster.set_status(task.backend_ref.rpartition("/")[2], running("10.0.0.5", "node-a"))
    run_pass(k8s)
    task.refresh_from_db()
    assert task.state == TaskState.RUNNING
    return task


async def alices_prompt(alice, k8s, cluster: FakeCluster, async_client_for):
    """A running pod of alice's, and her terminal into it, at its shell's prompt."""
    task = await running_pod(alice, k8s, cluster)
    communicator, connected, _ = await open_terminal(await async_client_for(alice), task.id)
    assert connected
    await read_until(communicator, "$ ")
    return task, communicator


async def type_line(communicator, line: str) -> None:
    await communicator.send_to(text_data=json.dumps({"type": "input", "data": line + "\r"}))


async def test_the_owner_types_in_the_pod_and_the_resize_reaches_it(
    alice, k8s, cluster: FakeCluster, async_client_for
):
    task, communicator = await alices_prompt(alice, k8s, cluster, async_client_for)
    await communicator.send_to(text_data=json.dumps({"type": "resize", "cols": 100, "rows": 30}))
    await type_line(communicator, "echo hi")
    assert "echo hi\r\nhi\r\n" in await read_until(communicator, "hi\r\n")
    (opened,) = cluster.execs
    assert opened.pod == task.backend_ref.rpartition("/")[2]
    assert opened.query["tty"] == ["true"]
    assert opened.resizes == [{"Width": 100, "Height": 30}]
    await type_line(communicator, "exit")
    assert "[the shell exited]" in await read_until(communicator, "the shell exited")
    assert (await communicator.receive_output(timeout=5))["code"] == terminal.ENDED
    await communicator.disconnect()


async def test_the_terminal_says_so_when_the_pods_task_ends(
    alice, k8s, cluster: FakeCluster, async_client_for
):
    task, communicator = await alices_prompt(alice, k8s, cluster, async_client_for)
    job = await database_sync_to_async(lambda: task.attempt.job)()
    await database_sync_to_async(lifecycle.stop)(job, alice)
    await database_sync_to_async(settle)(k8s, job)
    assert "the task has ended" in await read_until(communicator, "the task has ended")
    assert (await communicator.receive_output(timeout=5))["code"] == terminal.ENDED
    await communicator.disconnect()


async def test_an_idle_terminal_closes_on_kubernetes_too(
    alice, k8s, cluster: FakeCluster, async_client_for, settings
):
    settings.TERMINAL_IDLE_SECONDS = 0
    task = await running_pod(alice, k8s, cluster)
    communicator, connected, _ = await open_terminal(await async_client_for(alice), task.id)
    assert connected
    assert "closed after 0 seconds" in await read_until(communicator, "without activity")
    await communicator.disconnect()


async def test_another_user_gets_no_exec_into_the_pod(
    alice, bob, k8s, cluster: FakeCluster, async_client_for
):
    task = await running_pod(alice, k8s, cluster)
    communicator, connected, _ = await open_terminal(await async_client_for(bob), task.id)
    assert connected  # accepted, so that the page can tell why it closes at once
    assert await communicator.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": terminal.NO_TERMINAL,
    }
    assert cluster.execs == []


async def test_a_terminal_into_a_pod_that_is_not_running_is_refused(
    alice, k8s, cluster: FakeCluster, async_client_for
):
    task = await running_pod(alice, k8s, cluster)
    # The portal still has the task running, but its pod is back to Pending (its node was
    # lost and it is being scheduled again): the API server refuses the exec.
    cluster.set_status(task.backend_ref.rpartition("/")[2], {"phase": "Pending"})
    communicator, connected, _ = await open_terminal(await async_client_for(alice), task.id)
    assert connected
    assert await refused(communicator) == terminal.NO_TERMINAL
    assert cluster.execs == []
