"""``manage.py load_examples``: store the example configurations in ``examples/configs/``.

Idempotent (configurations are identified by content): running it again changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from configurations.services import configuration_create
from specportal.api.errors import ApplicationError

EXAMPLES_DIR = Path(settings.BASE_DIR) / "examples" / "configs"


class Command(BaseCommand):
    help = "Load the example frozen configurations (all three engines)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dir", type=Path, default=EXAMPLES_DIR)

    def handle(self, *args: Any, **options: Any) -> None:
        directory: Path = options["dir"]
        paths = sorted(directory.glob("*.json"))
        if not paths:
            raise CommandError(f"no example configurations in {directory}")
        created_count = 0
        for path in paths:
            body = json.loads(path.read_text(encoding="utf-8"))
            try:
                _, created = configuration_create(
                    document=body["document"],
                    name=body.get("name", path.stem),
                    description=body.get("description", ""),
                    labels={**body.get("labels", {}), "example": path.stem},
                )
            except ApplicationError as exc:
                raise CommandError(f"{path.name}: {exc.message}") from exc
            created_count += created
        self.stdout.write(
            f"example configurations: {created_count} new, {len(paths) - created_count} already stored"
        )
