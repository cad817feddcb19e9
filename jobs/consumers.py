"""WebSocket consumers. The job page listens here and fetches its live part when told to."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from jobs.access import visible_jobs
from jobs.news import group_name

NOT_FOUND = 4404


class JobNewsConsumer(AsyncJsonWebsocketConsumer):
    """Sends ``{"changed": job_id}`` whenever the job changes; owner and admins only.

    Anyone else (or a job that does not exist) is accepted, then closed with ``4404``: a close
    before accepting becomes an HTTP 403 that the browser only sees as ``1006``, and a page
    would retry that forever; ``4404`` tells it to stop."""

    group = ""

    async def connect(self) -> None:
        user = self.scope.get("user")
        job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        if user is None or not user.is_authenticated or not await self.may_see(user, job_id):
            await self.accept()
            await self.close(code=NOT_FOUND)
            return
        self.group = group_name(job_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    @database_sync_to_async
    def may_see(self, user: Any, job_id: int) -> bool:
        return visible_jobs(user).filter(id=job_id).exists()

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients have nothing to say; anything they send is ignored."""

    async def job_changed(self, event: dict[str, Any]) -> None:
        await self.send_json({"changed": event["job"]})
