"""``gpufinops ingest changes``: land the app DB's applied changes in the lake (``applied_changes``)."""

from __future__ import annotations

import typer

from cli.context import console, handle_errors, settings_of

__all__ = ["register"]


@handle_errors
def changes(ctx: typer.Context) -> None:
    """Land every applied change of the app DB (target, status, applied/verified/ended times, the estimate) for fct_change_outcomes; a re-run replaces the last export."""
    from gpufinops.appdb import open_app_db
    from ingest.applied_changes import export_applied_changes

    settings = settings_of(ctx)
    result = export_applied_changes(open_app_db(settings.effective_app_db_url), settings.lake_dir, quality=settings)
    if not result.rows:
        console.print("applied_changes: no change was applied yet; nothing landed")
    for cluster, n in result.rows.items():
        console.print(f"applied_changes: {n} change(s) of cluster {cluster} (run {result.runs[cluster]})")


def register(app: typer.Typer) -> None:
    app.command("changes")(changes)
