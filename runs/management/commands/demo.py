"""``manage.py demo``: the README's main command on embedded defaults."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from accounts import roles
from accounts.services import user_create_or_update

DEMO_USER = "demo"
DEMO_PASSWORD = "speculate-responsibly"


class Command(BaseCommand):
    help = "Migrate, create the demo login and serve the site on http://127.0.0.1:8000."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-serve", action="store_true", help="set up, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("load_examples")
        user_create_or_update(
            username=DEMO_USER,
            password=DEMO_PASSWORD,
            role_names=roles.ALL_ROLES,
            superuser=True,
        )
        address = f"http://127.0.0.1:{options['port']}/"
        self.stdout.write(f"SpecPortal is at {address}  (login: {DEMO_USER} / {DEMO_PASSWORD})")
        if options["no_serve"]:
            return
        call_command("runserver", f"127.0.0.1:{options['port']}", use_reloader=False)
