"""``gpufinops db upgrade``: bring the app DB (SQLite file or PostgreSQL) to the latest migration.

Every command that opens the app DB upgrades it anyway; this is for deploy hooks and operators.
"""

from __future__ import annotations

import typer
from sqlalchemy import inspect

from cli.context import console, handle_errors, settings_of

__all__ = ["register", "db_app"]

db_app = typer.Typer(name="db", help="The app DB (migrations).", no_args_is_help=True)


@db_app.command("upgrade")
@handle_errors
def upgrade(ctx: typer.Context) -> None:
    """Run the app DB migrations up to head (idempotent)."""
    from alembic.migration import MigrationContext

    from gpufinops.appdb import open_app_db

    url = settings_of(ctx).effective_app_db_url
    engine = open_app_db(url)
    with engine.connect() as conn:
        head = MigrationContext.configure(conn).get_current_revision()
    tables = sorted(inspect(engine).get_table_names())
    console.print(f"app DB {engine.url.render_as_string(hide_password=True)} at revision {head} "
                  f"({len(tables)} tables)")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
