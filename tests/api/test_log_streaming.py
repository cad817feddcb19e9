"""A task's whole log is streamed chunk by chunk, through the page's download and the API: the
web process does not grow by the log's size (a 1 GiB log once made it grow by 5 GB), and a
secret that a chunk's end cuts in two is still masked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
import requests
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from accounts.models import ApiToken
from backends.base import LOG_CHUNK_BYTES
from jobs import lifecycle
from jobs.models import JobAttempt, Task
from protocol import SecretMasker
from tests.jobs.samples import hello_job
from tests.support.servers import web_server

SECRET = "s3cr3t-value"
LOG_PAGE = "/jobs/alice~big/logs/0/main-0/stdout/"
API_LOG = "/api/v2/jobs/alice~big/attempts/0/tasks/main-0/logs/stdout"
LOG_MB = 200
LINE = b"step 0123456789 loss 0.123456789 accuracy 0.987654321 and some padding text\n"


def task_with_log(alice, root: Path) -> int:
    """alice's job ``big`` (secret ``token``) with a task whose stdout log is ``big_log``;
    how many secrets it holds."""
    job = lifecycle.submit(alice, hello_job("big", secrets=f"{{token: {SECRET}}}"))
    attempt = JobAttempt.objects.create(job=job, number=0, key=f"k-{job.id}")
    ref = f"k-{job.id}/main-0"
    Task.objects.create(attempt=attempt, role="main", index=0, state="SUCCEEDED", backend_ref=ref)
    (root / ref).mkdir(parents=True)
    with (root / ref / "stdout.log").open("wb") as out:
        return big_log(out)


def big_log(out: BinaryIO) -> int:
    """About LOG_MB MB of lines with the secret cut in two by every chunk boundary (the
    backend reads the file in chunks of LOG_CHUNK_BYTES); how many secrets it holds."""
    block = LINE * (LOG_CHUNK_BYTES // len(LINE) + 1)
    written = secrets = 0
    while written < LOG_MB * 1024 * 1024:
        boundary = (written // LOG_CHUNK_BYTES + 1) * LOG_CHUNK_BYTES
        head = block[: boundary - written - 5]
        out.write(head + SECRET.encode())  # 5 bytes before the boundary, the rest after it
        written += len(head) + len(SECRET)
        secrets += 1
    return secrets


def high_water_kb(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def reset_high_water(pid: int | str = "self") -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS


def consume(chunks: Iterator[bytes]) -> tuple[int, int, bool]:
    """(bytes, masks seen, whether the secret was seen in clear), keeping no chunk."""
    size = masks = 0
    clear = False
    tail = b""
    for chunk in chunks:
        size += len(chunk)
        seen = tail + chunk
        masks += seen.count(b"******") - tail.count(b"******")
        clear = clear or SECRET.encode() in seen
        tail = seen[-32:]
    return size, masks, clear


@pytest.mark.django_db
@pytest.mark.parametrize("path", [LOG_PAGE, API_LOG])
def test_a_200_mb_log_streams_masked_without_the_process_growing_by_its_size(alice, backend, path):
    secrets = task_with_log(alice, Path(backend.root))
    client = Client()
    client.force_login(alice)
    response = client.get(path)
    assert response.status_code == 200
    assert response.streaming
    reset_high_water()
    before = high_water_kb()
    size, masks, clear = consume(response.streaming_content)
    grown_mb = (high_water_kb() - before) / 1024
    assert size > LOG_MB * 1024 * 1024 * 0.9
    assert masks == secrets
    assert not clear  # every secret a chunk boundary cut in two is masked whole
    assert grown_mb < 40, f"the process grew by {grown_mb:.0f} MB for a {LOG_MB} MB log"


@pytest.mark.django_db(transaction=True)
def test_the_web_server_serving_a_200_mb_log_does_not_grow_by_its_size(alice, backend, tmp_path):
    """The server waits while the client's connection is full (uvicorn's flow control): daphne,
    which buffered whatever it was sent, grew by 111 MB here without a wait of the portal's."""
    task_with_log(alice, Path(backend.root))
    token = ApiToken.objects.issue(alice, 3600)[1]
    with web_server(tmp_path / "server.log") as base:
        headers = {"Authorization": f"Bearer {token}"}
        assert requests.get(base + "/api/v2/info", headers=headers, timeout=30).ok  # warm
        server = next(p for p in Path("/proc").iterdir() if is_server_on(p, base))
        reset_high_water(server.name)
        before = high_water_kb(server.name)
        with requests.get(base + API_LOG, headers=headers, stream=True, timeout=60) as answer:
            assert answer.status_code == 200
            assert "Content-Length" not in answer.headers  # streamed, not built whole
            size, _, clear = consume(answer.iter_content(256 * 1024))
        grown_mb = (high_water_kb(server.name) - before) / 1024
    assert size > LOG_MB * 1024 * 1024 * 0.9 and not clear
    assert grown_mb < 20, f"the server grew by {grown_mb:.0f} MB for a {LOG_MB} MB log"


def is_server_on(proc: Path, base: str) -> bool:
    try:
        command = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"portal.serve" in command and base.rsplit(":", 1)[1].encode() in command


@given(
    text=st.lists(st.sampled_from([SECRET, "s3cr", "3t-value", "hunter2", "x", "\n", "s"])),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_masking_chunk_by_chunk_masks_as_masking_the_whole(text: list[str], cuts: list[int]):
    masker = SecretMasker({SECRET, "hunter2", "s3cr3t"})
    data = "".join(text).encode()
    points = sorted({min(c, len(data)) for c in cuts})
    parts = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert b"".join(masker.chunks(parts)) == masker(data)
