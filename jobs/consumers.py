"""WebSocket consumers. The job page and the job list listen here and fetch their live part
when told to."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from jobs.access import listable_jobs, visible_jobs
from jobs.news import group_name, queue_group_name
from jobs.states import FINAL_JOB_STATES, JobState

NOT_FOUND = 4404


class JobGroupsConsumer(AsyncJsonWebsocketConsumer):
    """Listens to the job groups in ``listening`` (joined on connect) and passes each job's
    change on as ``{"changed": job_id}``; clients have nothing to say."""

    listening: tuple[str, ...] = ()  # the groups it joined

    async def join(self, groups: tuple[str, ...]) -> None:
        self.listening = groups
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in self.listening:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients have nothing to say; anything they send is ignored."""

    async def job_changed(self, event: dict[str, Any]) -> None:
        await self.send_json({"changed": event["job"]})


class JobNewsConsumer(JobGroupsConsumer):
    """Sends ``{"changed": job_id}`` whenever the job changes, and, while it waits, whenever
    its virtual cluster's queue moves (its position may have); owner and admins only.

    Anyone else (or a job that does not exist) is accepted, then closed with ``4404``: a close
    before accepting becomes an HTTP 403 that the browser only sees as ``1006``, and a page
    would retry that forever; ``4404`` tells it to stop."""

    job_id = 0

    async def connect(self) -> None:
        user = self.scope.get("user")
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        seen = None
        if user is not None and user.is_authenticated:
            seen = await self.state_and_queue(user, self.job_id)
        if seen is None:
            await self.accept()
            await self.close(code=NOT_FOUND)
            return
        state, vc_name = seen
        groups = (group_name(self.job_id),)
        if state == JobState.WAITING:
            groups += (queue_group_name(vc_name),)
        await self.join(groups)

    @database_sync_to_async
    def state_and_queue(self, user: Any, job_id: int) -> tuple[str, str] | None:
        """The job's state and virtual cluster, when ``user`` may see it."""
        row = visible_jobs(user).filter(id=job_id).values_list("state", "virtual_cluster__name")
        return row.first()

    async def queue_changed(self, event: dict[str, Any]) -> None:
        await self.send_json({"changed": self.job_id})


MAX_LISTED = 100  # the job list's largest page


class JobListNewsConsumer(JobGroupsConsumer):
    """The job list's news: ``/ws/jobs/?ids=1,2,3`` sends ``{"changed": job_id}`` whenever one
    of those jobs changes. Only the ids the user may see in lists are followed (the others are
    ignored, as the list would not show them), and only those not ended yet; anonymous
    visitors are closed with ``4404`` as on the job page."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.accept()
            await self.close(code=NOT_FOUND)
            return
        asked = ids_of(self.scope.get("query_string", b""))
        await self.join(tuple(group_name(i) for i in await self.followed(user, asked)))

    @database_sync_to_async
    def followed(self, user: Any, asked: list[int]) -> list[int]:
        jobs = listable_jobs(user).filter(id__in=asked).exclude(state__in=FINAL_JOB_STATES)
        return list(jobs.values_list("id", flat=True))


def ids_of(query_string: bytes) -> list[int]:
    """The job ids of ``ids=1,2,3`` (at most ``MAX_LISTED``; anything else is ignored)."""
    values = parse_qs(query_string.decode("latin-1")).get("ids", [""])[0]
    return [int(i) for i in values.split(",") if i.isdigit() and len(i) < 19][:MAX_LISTED]
