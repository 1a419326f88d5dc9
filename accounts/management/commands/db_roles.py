"""``manage.py db_roles --app-role NAME``: the role the web process, the workers and beat use.

The database guards (frozen identity, locked experiments, append-only results) are triggers, and
a table's owner can disable or drop its triggers (``ALTER TABLE ... DISABLE TRIGGER``) or switch
them off (``SET LOCAL specportal.identity_guard = 'off'``). So in production the processes that
serve requests connect as a role that owns nothing: it may read and write rows (SELECT, INSERT,
UPDATE, DELETE; USAGE on sequences) and nothing else — no TRUNCATE (which skips row triggers),
no TRIGGER, no REFERENCES, no CREATE in the schema, not a member of the owner, not a superuser.
Migrations run as the owner (the role of ``DATABASE_URL`` when this command runs).

Run it as the owner after every ``migrate`` (it is idempotent; default privileges cover tables
later migrations create too). ``--print`` only prints the SQL, for a DBA to run.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE"


def statements(*, app_role: str, owner: str, database: str, schema: str) -> list[str]:
    """The SQL that makes ``app_role`` a role that uses the tables without owning them."""
    q = connection.ops.quote_name
    app, own = q(app_role), q(owner)
    return [
        f"REVOKE ALL ON DATABASE {q(database)} FROM {app}",
        f"GRANT CONNECT, TEMPORARY ON DATABASE {q(database)} TO {app}",
        f"REVOKE ALL ON SCHEMA {q(schema)} FROM {app}",
        f"GRANT USAGE ON SCHEMA {q(schema)} TO {app}",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {q(schema)} FROM {app}",
        f"GRANT {PRIVILEGES} ON ALL TABLES IN SCHEMA {q(schema)} TO {app}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {q(schema)} FROM {app}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {q(schema)} TO {app}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {own} IN SCHEMA {q(schema)} "
        f"GRANT {PRIVILEGES} ON TABLES TO {app}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {own} IN SCHEMA {q(schema)} "
        f"GRANT USAGE, SELECT ON SEQUENCES TO {app}",
    ]


class Command(BaseCommand):
    help = (
        "Create or update the database role the web process and workers use: it reads and "
        "writes rows but owns no table, so it cannot disable the database guards (PostgreSQL)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--app-role", required=True, help="name of the role to set up")
        parser.add_argument(
            "--password-env",
            help="environment variable holding the role's password (set on the role; a "
            "password is never taken on the command line)",
        )
        parser.add_argument(
            "--print", action="store_true", help="print the SQL instead of running it"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "postgresql":
            raise CommandError(
                "db_roles is for PostgreSQL; SQLite has no roles (the demo's database is a "
                "file: whoever can write it can change anything)."
            )
        app_role: str = options["app_role"]
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user, current_database(), current_schema()")
            owner, database, schema = cursor.fetchone()
        if app_role == owner:
            raise CommandError(
                f"--app-role {app_role} is the role this command runs as, which owns the "
                "tables: name another role"
            )
        sql = statements(app_role=app_role, owner=owner, database=database, schema=schema)
        password = None
        if options["password_env"]:
            password = os.environ.get(options["password_env"])
            if not password:
                raise CommandError(f"{options['password_env']} is not set or empty")
        if options["print"]:
            create = f"CREATE ROLE {connection.ops.quote_name(app_role)} LOGIN NOSUPERUSER "
            create += "NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            for line in [create, *sql]:
                self.stdout.write(line + ";")
            return
        with transaction.atomic(), connection.cursor() as cursor:
            self._ensure_role(cursor, app_role, password)
            for statement in sql:
                cursor.execute(statement)
            problems = self._problems(cursor, app_role, owner, schema)
        if problems:
            raise CommandError(f"role {app_role} is not safe: " + "; ".join(problems))
        self.stdout.write(
            f"role {app_role}: reads and writes the tables of {database}.{schema}, owns none "
            f"(owner {owner}); point the web process, the workers and beat at it"
        )

    def _ensure_role(self, cursor: Any, app_role: str, password: str | None) -> None:
        quoted = connection.ops.quote_name(app_role)
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [app_role])
        attributes = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
        verb = "ALTER" if cursor.fetchone() else "CREATE"
        cursor.execute(f"{verb} ROLE {quoted} {attributes}")
        if password is not None:
            cursor.execute(f"ALTER ROLE {quoted} PASSWORD %s", [password])

    def _problems(self, cursor: Any, app_role: str, owner: str, schema: str) -> list[str]:
        """What would still let the role switch the guards off."""
        problems = []
        cursor.execute(
            "SELECT rolsuper, rolbypassrls, pg_has_role(%s, %s, 'USAGE') "
            "FROM pg_roles WHERE rolname = %s",
            [app_role, owner, app_role],
        )
        superuser, bypass, member = cursor.fetchone()
        if superuser:
            problems.append("it is a superuser")
        if bypass:
            problems.append("it bypasses row-level security")
        if member:
            problems.append(f"it has the privileges of the owner {owner}")
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') "
            "AND (pg_has_role(%s, c.relowner, 'USAGE') "
            "OR has_table_privilege(%s, c.oid, 'TRUNCATE') "
            "OR has_table_privilege(%s, c.oid, 'TRIGGER'))",
            [schema, app_role, app_role, app_role],
        )
        owned = [row[0] for row in cursor.fetchall()]
        if owned:
            problems.append(f"it owns, may truncate or may add triggers to {', '.join(owned)}")
        return problems
