"""One job cannot take the machine down: alice's job attacks the machine (a fork bomb, filling
its disk, /tmp and /dev/shm, holding all memory, opening a million files, flooding its log)
while bob submits a trivial job at the same moment. Bob's job SUCCEEDS, the pages keep answering,
and alice's ends FAILED with a reason that names the limit it met."""

from __future__ import annotations

import os

import pytest
from django.test import Client

from clusters import registry
from jobs import lifecycle
from jobs.models import Job, Task
from jobs.states import JobState
from tests.jobs.helpers import reconcile_until
from tests.runtime.jobs import one_role

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="the kernel's limits need root"),
]

DD = "dd if=/dev/zero of={} bs=1M count=400 status=none"
ATTACKS = {
    "fork_bomb": (
        ["bomb() { bomb | bomb & }", "bomb", "sleep 600"],
        "hit its limit of 128 processes and threads (LOCAL_TASK_PIDS_MAX)",
    ),
    "fill_disk": (
        # tmpfs pages count as the task's memory too: each filled, then emptied
        [f"{DD.format(f)}; rm {f}" for f in ("/dev/shm/big", "/tmp/big")] + [DD.format("big")],
        "filled its disk limit of 64 MB (LOCAL_TASK_DISK_MB): No space left on device",
    ),
    "all_memory": (
        # In steps: one allocation larger than the machine is refused before the limit counts.
        ["python3 -c 'b = []\nwhile True: b.append(bytearray(16 * 1024 ** 2))'", "echo survived"],
        "OOMKilled: the task went over its memoryMB (128 MB)",
    ),
    "million_files": (
        ["python3 -c 'import os; [os.open(\"/dev/null\", 0) for _ in range(10 ** 6)]'"],
        "hit its limit of 1024 open files per process (LOCAL_TASK_NOFILE)",
    ),
    "log_flood": (
        ["head -c 100000000 /dev/zero", "exit 1"],  # 100 times the cap
        "wrote more than 1048576 bytes on stdout (LOCAL_TASK_LOG_MAX_BYTES)",
    ),
}


@pytest.fixture
def limited(settings, backend):
    """The limits made small, so that each attack meets its own at once."""
    settings.LOCAL_TASK_PIDS_MAX = 128
    settings.LOCAL_TASK_DISK_MB = 64
    settings.LOCAL_TASK_NOFILE = 1024
    settings.LOCAL_TASK_LOG_MAX_BYTES = 1024 * 1024
    registry.get_backend.cache_clear()
    local = registry.get_backend()
    yield local
    refs = [t.backend_ref for t in Task.objects.exclude(backend_ref="")]
    local.stop(refs)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_fails_on_its_limit_while_another_users_job_succeeds(
    attack: str, alice, bob, limited
):
    commands, reason = ATTACKS[attack]
    attackers = lifecycle.submit(alice, one_role(f"attack-{attack.replace('_', '-')}", commands))
    trivial = lifecycle.submit(bob, one_role("trivial", ["echo bob was here"]))
    page = Client()
    page.force_login(bob)

    def both_final() -> bool:
        assert page.get("/jobs/").status_code == 200  # the pages keep answering
        return all(Job.objects.get(id=j.id).is_final for j in (attackers, trivial))

    reconcile_until(limited, both_final, timeout=120)
    trivial.refresh_from_db()
    attackers.refresh_from_db()
    assert trivial.state == JobState.SUCCEEDED, trivial.reason
    task = Task.objects.get(attempt__job=trivial)
    assert limited.read_log(task.backend_ref, "stdout").endswith(b"bob was here\n")
    assert attackers.state == JobState.FAILED
    diagnostics = Task.objects.get(attempt__job=attackers).diagnostics
    assert reason in diagnostics, diagnostics
