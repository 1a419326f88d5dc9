from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts import roles
from accounts.models import ApiToken
from accounts.selectors import user_has_role
from accounts.services import api_token_rotate, user_create_or_update
from specportal.api.errors import ApplicationError


class Command(BaseCommand):
    help = "Create or update a user with roles; optionally print a fresh API token (for CI)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--role",
            action="append",
            default=[],
            choices=roles.ALL_ROLES,
            help="a role to grant (repeatable)",
        )
        parser.add_argument("--password", help="login password (omit for token-only users)")
        parser.add_argument("--superuser", action="store_true")
        parser.add_argument(
            "--token",
            action="store_true",
            help="issue and print an API token (shown once; replaces the user's live token of "
            "the same --token-name)",
        )
        parser.add_argument("--token-name", default="create_user", help="the token's name")
        parser.add_argument(
            "--scope",
            choices=ApiToken.Scope.values,
            help="the token's scope (default: submit for an experimenter, else read)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            user = user_create_or_update(
                username=options["username"],
                password=options["password"],
                role_names=options["role"],
                superuser=options["superuser"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if options["token"]:
            scope = options["scope"] or (
                ApiToken.Scope.SUBMIT
                if user_has_role(user, roles.EXPERIMENTER)
                else ApiToken.Scope.READ
            )
            try:
                secret = api_token_rotate(user=user, name=options["token_name"], scope=scope)
            except ApplicationError as exc:
                raise CommandError(f"{exc.message} {exc.fields}") from exc
            self.stdout.write(secret)
        else:
            self.stdout.write(f"user {user.username}: roles {', '.join(options['role']) or 'none'}")
