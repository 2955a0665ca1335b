"""``gpufinops ingest ...``: one sub-command per source, each in its own module, plus ``all``."""

from __future__ import annotations

import importlib
import time

import typer
from rich.table import Table

from cli.context import console, handle_errors, settings_of

ingest_app = typer.Typer(help="Land a source in the lake (idempotent per source, cluster and window).", no_args_is_help=True)

_SOURCE_MODULES = [
    "cli.commands.ingest_k8s",
    "cli.commands.ingest_prometheus",
    "cli.commands.ingest_prices",
    "cli.commands.ingest_billing",
    "cli.commands.ingest_changes",
]


@ingest_app.command("all")
@handle_errors
def ingest_all(
    ctx: typer.Context,
    once: bool = typer.Option(False, "--once", help="Run every configured source once and exit (for CronJobs)."),
    every: int = typer.Option(0, "--every", help="Seconds between passes when not --once.", min=0),
    iterations: int = typer.Option(0, "--iterations", help="Stop after N passes (0 = forever).", min=0),
) -> None:
    """Every source under `sources:` in the config; exit 1 if any source failed."""
    from ingest.schedule import run_all_once

    settings = settings_of(ctx)
    if not once and not every:
        raise typer.BadParameter("pass --once, or --every SECONDS to loop")
    passes, failed = 0, False
    while True:
        outcomes = run_all_once(settings)
        table = Table("source", "cluster", "ok", "seconds", "detail", title="ingest all")
        for o in outcomes:
            table.add_row(o.kind, o.cluster or "", "yes" if o.ok else "[red]NO[/]", f"{o.seconds}", o.detail)
        console.print(table)
        failed = any(not o.ok for o in outcomes)
        passes += 1
        if once or (iterations and passes >= iterations):
            break
        time.sleep(every)
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    for name in _SOURCE_MODULES:
        importlib.import_module(name).register(ingest_app)
    app.add_typer(ingest_app, name="ingest")
