"""What the tests read of README.md."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def first_job() -> str:
    """The README's first job, exactly as shown between its markers."""
    text = README.read_text()
    block = text.split("<!-- first-job -->", 1)[1].split("<!-- /first-job -->", 1)[0]
    return block.strip().removeprefix("```yaml\n").removesuffix("```")
