"""A task's log as people read it: the job page's tails, the log page and its download, and the
API's task logs all read through here, which masks every secret of the job. A whole log is
streamed chunk by chunk (``task_log_chunks``): a 1 GiB log once made the web process grow by
5 GB; a tail is read whole, at most ``MAX_TAIL_BYTES``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, cast

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse

from clusters.registry import get_backend
from protocol import secret_masker

if TYPE_CHECKING:
    from backends.base import Backend
    from jobs.models import Job

MAX_TAIL_BYTES = 16 * 1024 * 1024


def read_task_log(
    job: Job, ref: str, stream: str, tail: int, backend: Backend | None = None
) -> bytes:
    """The last ``tail`` bytes (at most ``MAX_TAIL_BYTES``) of the task's ``stream``, with each
    secret value of ``job`` as ``******``, also one that the tail's first byte cuts in two."""
    if tail > MAX_TAIL_BYTES:
        raise ValueError(f"a tail is at most {MAX_TAIL_BYTES} bytes, not {tail}")
    mask = secret_masker(job.protocol)
    backend = backend or get_backend()
    if tail == 0:
        return b""
    data = backend.read_log(ref, stream, tail + mask.margin)
    return mask(data, start=max(0, len(data) - tail))


def task_log_chunks(
    job: Job, ref: str, stream: str, backend: Backend | None = None
) -> Iterator[bytes]:
    """The task's whole ``stream`` in chunks, each secret value of ``job`` as ``******``, also
    one that a chunk's end cuts in two."""
    mask = secret_masker(job.protocol)
    return mask.chunks((backend or get_backend()).log_chunks(ref, stream))


class LogResponse(StreamingHttpResponse):
    """A whole log as a streamed text response, one chunk in memory at a time.

    Under ASGI Django reads a plain iterator into a list before it sends the first byte (its
    ``StreamingHttpResponse.__aiter__``), the whole log in memory; here each chunk is read in
    a worker thread when the server asks for it. Under WSGI and the test client the plain
    iterator is used as it is."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__(chunks, content_type="text/plain; charset=utf-8")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = cast(Iterator[bytes], self.streaming_content)  # built from an iterator

        def next_chunk() -> bytes | None:
            return next(chunks, None)

        read = sync_to_async(next_chunk, thread_sensitive=False)  # a file or an HTTP stream
        while (chunk := await read()) is not None:
            yield chunk
