"""``manage.py audit verify|export``: check the audit chain, or write it out as JSON lines.

``verify`` walks the table in order and prints the first broken link (exit 1), or
``audit chain intact`` with the head (exit 0). ``--log FILE`` also compares the last head written
to the audit head log (``SPECPORTAL_AUDIT_HEAD_LOG``; the default when the file exists) with the
table, which finds deleted newest events; ``--file EXPORT`` checks an exported copy instead of the
database.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.chain import verify_chain
from audit.selectors import chain, logged_head


def _export_lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CommandError(f"{path}:{number}: not JSON ({exc.msg})") from exc
            if not isinstance(event, dict) or "seq" not in event or "hash" not in event:
                raise CommandError(f"{path}:{number}: not an audit event")
            yield event


class Command(BaseCommand):
    help = "Verify the audit trail's hash chain (verify) or export it as JSON lines (export)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="what", required=True)
        verify = sub.add_parser("verify", help="check the chain; print the first broken link")
        verify.add_argument("--log", type=Path, help="the audit head log to compare the head with")
        verify.add_argument("--no-log", action="store_true", help="do not read the head log")
        verify.add_argument("--file", type=Path, help="check an exported copy (JSON lines)")
        verify.add_argument("--database", default="default")
        export = sub.add_parser("export", help="write every event, in order, as JSON lines")
        export.add_argument("--output", type=Path, help="file to write (default: stdout)")
        export.add_argument("--database", default="default")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["what"] == "export":
            self._export(options["output"], options["database"])
            return
        log_path: Path | None = options["log"]
        if log_path is None and not options["no_log"]:
            default = Path(settings.AUDIT_HEAD_LOG)
            log_path = default if default.exists() else None
        expected = None
        if log_path is not None:
            if not log_path.exists():
                raise CommandError(f"no audit head log at {log_path}")
            expected = logged_head(log_path)
        if options["file"] is not None:
            if not options["file"].exists():
                raise CommandError(f"no such file: {options['file']}")
            events: Any = _export_lines(options["file"])
            source = str(options["file"])
        else:
            events = chain(using=options["database"])
            source = "the database"
        report = verify_chain(events, expected_head=expected)
        if not report.intact:
            self.stdout.write(f"audit chain BROKEN in {source}: {report.broken}")
            self.stdout.write(
                f"{report.count} events read; the chain holds up to event #{report.head_seq}"
            )
            sys.exit(1)
        against = f"; the log's head #{expected[0]} matches" if expected else ""
        self.stdout.write(
            f"audit chain intact in {source}: {report.count} events, head "
            f"#{report.head_seq} {report.head_hash}{against}"
        )

    def _export(self, output: Path | None, using: str) -> None:
        stream = output.open("w", encoding="utf-8") if output else self.stdout
        count = 0
        try:
            for event in chain(using=using):
                stream.write(json.dumps(event, sort_keys=True) + "\n")
                count += 1
        finally:
            if output:
                stream.close()
        if output:
            self.stderr.write(f"{count} audit events written to {output}")
