"""``gpufinops check``: the lake-level data-quality suites, as a report; run it before ``build``."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from cli.context import console, handle_errors, settings_of
from gpufinops.errors import ConfigError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command("check")
    @handle_errors
    def check(
        ctx: typer.Context,
        only: Annotated[list[str] | None, typer.Option("--only", help="Run just this check (repeatable).")] = None,
        deep: Annotated[bool, typer.Option("--deep", help="Also run the checks that read every row: keys unique across runs, every file against its table suite.")] = False,
        strict: Annotated[bool, typer.Option("--strict", help="Fail on warnings too (e.g. unpriced instance types).")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    ) -> None:
        """Check the lake: a price for every node type, no over-allocated node, final run statuses.

        Exit status 0 when everything passes (warnings allowed unless --strict), 1 otherwise.
        """
        from ingest.quality.lake_checks import run_lake_checks

        settings = settings_of(ctx)
        lake = settings.lake_dir
        if not lake.is_dir():
            raise ConfigError(f"no lake at {lake}; set --home / GPUFINOPS_HOME or run an ingest first")
        try:
            results = run_lake_checks(lake, names=only or None, deep=deep)
        except KeyError as exc:
            raise ConfigError(str(exc.args[0])) from exc
        failed = [r for r in results if not r.success and (r.severity == "error" or strict)]
        if as_json:
            console.print_json(json.dumps([
                {"check": r.name, "severity": r.severity, "success": r.success, "skipped": r.skipped,
                 "checked": r.checked, "message": r.message} for r in results
            ]))
        else:
            table = Table(title=f"data-quality checks of {lake}", show_lines=True)
            for col in ("check", "severity", "result", "details"):
                table.add_column(col, overflow="fold")
            for r in results:
                verdict = "[dim]skipped[/]" if r.skipped else "[green]pass[/]" if r.success else (
                    "[red]FAIL[/]" if r.severity == "error" or strict else "[yellow]warn[/]")
                table.add_row(r.name, r.severity, verdict, r.message)
            console.print(table)
        if failed:
            raise typer.Exit(1)
