"""WebSocket consumers. The job page listens here and fetches its live part when told to."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from jobs.access import visible_jobs
from jobs.news import group_name, queue_group_name
from jobs.states import JobState

NOT_FOUND = 4404


class JobNewsConsumer(AsyncJsonWebsocketConsumer):
    """Sends ``{"changed": job_id}`` whenever the job changes, and, while it waits, whenever
    its virtual cluster's queue moves (its position may have); owner and admins only.

    Anyone else (or a job that does not exist) is accepted, then closed with ``4404``: a close
    before accepting becomes an HTTP 403 that the browser only sees as ``1006``, and a page
    would retry that forever; ``4404`` tells it to stop."""

    listening: tuple[str, ...] = ()  # the groups it joined
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
        self.listening = (group_name(self.job_id),)
        if state == JobState.WAITING:
            self.listening += (queue_group_name(vc_name),)
        for group in self.listening:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    @database_sync_to_async
    def state_and_queue(self, user: Any, job_id: int) -> tuple[str, str] | None:
        """The job's state and virtual cluster, when ``user`` may see it."""
        row = visible_jobs(user).filter(id=job_id).values_list("state", "virtual_cluster__name")
        return row.first()

    async def disconnect(self, code: int) -> None:
        for group in self.listening:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients have nothing to say; anything they send is ignored."""

    async def job_changed(self, event: dict[str, Any]) -> None:
        await self.send_json({"changed": event["job"]})

    async def queue_changed(self, event: dict[str, Any]) -> None:
        await self.send_json({"changed": self.job_id})
