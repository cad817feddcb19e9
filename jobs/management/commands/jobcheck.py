"""``manage.py jobcheck FILE``: print the normalised job, or every error; exit 0 or 1."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from protocol import ProtocolError, load_job, mask_secrets


class Command(BaseCommand):
    help = "Check a job file (v2 YAML or v1 JSON): print the normalised job or every error."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="path of the job file, or - for standard input")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["file"]
        try:
            data = sys.stdin.buffer.read() if name == "-" else open(name, "rb").read()  # noqa: SIM115
        except OSError as exc:
            self.stderr.write(f"{name}: {exc.strerror}")
            sys.exit(1)
        try:
            loaded = load_job(data, max_bytes=settings.JOB_MAX_BYTES)
        except ProtocolError as exc:
            for issue in exc.issues:
                self.stderr.write(f"{issue.path}: {issue.message}" if issue.path else issue.message)
            sys.exit(1)
        for warning in loaded.warnings:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(json.dumps(mask_secrets(loaded.job), indent=2))
