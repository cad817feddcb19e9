"""Seed 000's TensorFlow job parsed, validated, normalised and rendered, per second on one core.

Aim (issue 3): above 2,000 per second. Runs ten rounds of half a second and prints each
round's rate, the median, and last the best round: as ``timeit`` advises, the fastest round is
the code's speed, and slower rounds measure what else the machine was doing (on this shared VM,
rounds of the same code differ by up to a third).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protocol import load_job, mask_secrets, render_role  # noqa: E402

EXAMPLE = (ROOT / "tests/protocol/examples/000_tensorflow_cifar10.yaml").read_text()
ROUNDS = 10
ROUND_SECONDS = 0.5


def one_job() -> None:
    job = load_job(EXAMPLE).job
    for role in job["taskRoles"]:
        render_role(job, role)
    mask_secrets(job)


def main() -> None:
    for _ in range(50):  # warm up
        one_job()
    rates = []
    for _ in range(ROUNDS):
        count = 0
        start = time.perf_counter()
        while time.perf_counter() - start < ROUND_SECONDS:
            one_job()
            count += 1
        rates.append(count / (time.perf_counter() - start))
    rates.sort()
    median = rates[len(rates) // 2]
    print(f"rounds of {ROUND_SECONDS} s, jobs a second: {', '.join(f'{r:.0f}' for r in rates)}")
    print(f"median round: {median:.0f} a second ({1e6 / median:.0f} us a job)")
    print(
        "seed 000 jobs per second (parse, validate, normalise, render), best round: "
        f"{rates[-1]:.0f} ({1e6 / rates[-1]:.0f} us a job)"
    )


if __name__ == "__main__":
    main()
