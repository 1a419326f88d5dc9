"""The PostgreSQL database a benchmark measures in: ``DATABASE_URL``'s, created when missing (a
scratch database of its own) and migrated. Call after ``django.setup()``."""

from __future__ import annotations

import sys
from typing import Any


def prepare() -> bool:
    """Ready to measure; False (with a one-line message) when the database is not PostgreSQL."""
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql":
        print("set DATABASE_URL to a PostgreSQL database", file=sys.stderr)
        return False
    create_if_missing(connection)
    call_command("migrate", interactive=False, verbosity=0)
    return True


def create_if_missing(connection: Any) -> None:
    """Create the connection's database through the server's ``postgres`` database."""
    import psycopg
    from psycopg import sql

    params = connection.get_connection_params()
    name = params.pop("dbname")
    try:
        psycopg.connect(dbname=name, **params).close()
    except psycopg.OperationalError:
        with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        print(f"created database {name}")
