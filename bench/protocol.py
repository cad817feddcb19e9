"""Seed 000's TensorFlow job parsed, validated, normalised and rendered, per second on one core.

Aim (issue 3): above 2,000 per second. Prints the figure last.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.protocol import load_job, mask_secrets, render_role  # noqa: E402

EXAMPLE = (ROOT / "tests/protocol/examples/000_tensorflow_cifar10.yaml").read_text()
SECONDS = 3.0


def one_job() -> None:
    job = load_job(EXAMPLE).job
    for role in job["taskRoles"]:
        render_role(job, role)
    mask_secrets(job)


def main() -> None:
    for _ in range(50):  # warm up
        one_job()
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < SECONDS:
        one_job()
        count += 1
    elapsed = time.perf_counter() - start
    print(f"jobs: {count} in {elapsed:.2f} s, {elapsed / count * 1e6:.0f} us per job")
    print(f"seed 000 jobs per second (parse, validate, normalise, render): {count / elapsed:.0f}")


if __name__ == "__main__":
    main()
