"""The web terminal: a shell in a running task, for its owner only."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from jobs import lifecycle
from jobs.models import Task
from jobs.states import TaskState
from tests.jobs.helpers import reconcile_until, settle
from tests.jobs.samples import hello_job
from tests.jobs.websockets import open_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def running_job(alice, backend, command: str = "sleep 60"):
    job = lifecycle.submit(alice, hello_job("term", command=command))
    reconcile_until(
        backend, lambda: Task.objects.filter(attempt__job=job, state=TaskState.RUNNING).exists()
    )
    return job, Task.objects.get(attempt__job=job)


async def open_terminal(client, task_id: int):
    return await open_socket(client, f"/ws/tasks/{task_id}/terminal/")


async def read_until(communicator, needle: str, timeout: float = 10.0) -> str:
    seen = ""
    deadline = asyncio.get_running_loop().time() + timeout
    while needle not in seen:
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            raise AssertionError(f"{needle!r} not in {seen!r}")
        seen += await communicator.receive_from(timeout=left)
    return seen


async def test_the_owner_types_in_the_task_and_sees_its_environment(
    alice, backend, async_client_for
):
    job, task = await sync_to_async(running_job)(alice, backend)
    communicator, connected, _ = await open_terminal(await async_client_for(alice), task.id)
    assert connected
    await communicator.send_to(text_data=json.dumps({"type": "resize", "cols": 100, "rows": 30}))
    await communicator.send_to(
        text_data=json.dumps({"type": "input", "data": "echo role=$PAI_CURRENT_TASK_ROLE_NAME\n"})
    )
    assert "role=main" in await read_until(communicator, "role=main")
    await communicator.send_to(text_data=json.dumps({"type": "input", "data": "pwd\n"}))
    assert task.backend_ref in await read_until(communicator, task.backend_ref)
    await communicator.disconnect()
    await sync_to_async(lifecycle.stop)(job, alice)
    await sync_to_async(settle)(backend, job)


IDLE_SECONDS = 30  # six times redis-py 8's default read timeout, which once closed both sockets


async def test_a_news_socket_and_a_terminal_stay_open_when_idle(alice, backend, async_client_for):
    """Both sockets wait on channels-redis's blocking receive while nothing happens; after a
    long silence the same connections still carry an echo and news of the job."""
    job, task = await sync_to_async(running_job)(alice, backend, "sleep 300")
    client = await async_client_for(alice)
    news, news_connected, _ = await open_socket(client, f"/ws/jobs/{job.id}/")
    terminal, terminal_connected, _ = await open_terminal(client, task.id)
    assert news_connected and terminal_connected

    await asyncio.sleep(IDLE_SECONDS)

    await terminal.send_to(text_data=json.dumps({"type": "input", "data": "echo still-$((6*7))\n"}))
    assert "still-42" in await read_until(terminal, "still-42")
    await sync_to_async(lifecycle.stop)(job, alice)
    assert await news.receive_json_from(timeout=10) == {"changed": job.id}
    await sync_to_async(settle)(backend, job)
    await terminal.disconnect()
    await news.disconnect()


async def refused(communicator) -> int:
    """The close code of a terminal that was accepted only to be closed, nothing sent first."""
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close", message
    return message["code"]


async def test_another_user_gets_no_terminal(alice, bob, backend, async_client_for):
    job, task = await sync_to_async(running_job)(alice, backend)
    communicator, connected, _ = await open_terminal(await async_client_for(bob), task.id)
    assert connected  # accepted so that the browser sees the close code, not a failed handshake
    assert await refused(communicator) == 4404
    await sync_to_async(lifecycle.stop)(job, alice)
    await sync_to_async(settle)(backend, job)


async def test_the_terminal_says_so_when_the_task_ends(alice, backend, async_client_for):
    job, task = await sync_to_async(running_job)(alice, backend)
    communicator, connected, _ = await open_terminal(await async_client_for(alice), task.id)
    assert connected
    await sync_to_async(lifecycle.stop)(job, alice)
    await sync_to_async(settle)(backend, job)
    assert "the task has ended" in await read_until(communicator, "the task has ended")


async def test_a_finished_task_has_no_terminal(alice, backend, async_client_for):
    job = await sync_to_async(settle)(
        backend, await sync_to_async(lifecycle.submit)(alice, hello_job("done"))
    )
    task = await sync_to_async(Task.objects.get)(attempt__job=job)
    communicator, connected, _ = await open_terminal(await async_client_for(alice), task.id)
    assert connected
    assert await refused(communicator) == 4404


async def test_a_task_that_does_not_exist_has_no_terminal(alice, async_client_for):
    communicator, connected, _ = await open_terminal(await async_client_for(alice), 999999)
    assert connected
    assert await refused(communicator) == 4404
