"""``gpufinops ingest billing``: land FOCUS 1.0-1.3 bill files (CSV or Parquet)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.context import console, handle_errors, settings_of
from gpufinops.errors import InputError

__all__ = ["register"]


@handle_errors
def billing(
    ctx: typer.Context,
    focus: Annotated[list[Path] | None, typer.Option(
        "--focus", help="FOCUS bill file, or a folder of parts (repeatable: give all parts of one export together).")] = None,
    focus_version: Annotated[str | None, typer.Option(
        "--focus-version", help="1.0 | 1.1 | 1.2 | 1.3 (default: detected from the columns).")] = None,
    demo_bill: Annotated[Path | None, typer.Option(
        "--demo-bill", help="Write a FOCUS 1.2 bill for the demo fleet from the warehouse to this file, then land it.")] = None,
) -> None:
    """Land FOCUS bills in `billing_focus`: one run per (billing period, provider, billing account, sub-account); a re-ingest replaces that slice and says so."""
    from ingest.focus import ingest_focus_files

    settings = settings_of(ctx)
    paths = list(focus or [])
    if demo_bill is not None:
        from gpufinops.warehouse import connect
        from ingest.focus.demo_bill import write_demo_bill

        con = connect(settings.warehouse_path, read_only=True)
        try:
            made = write_demo_bill(con, demo_bill, lake_dir=settings.lake_dir)
        finally:
            con.close()
        console.print(f"demo bill {made.path}: {made.node_lines} node-day lines, {made.other_lines} other lines, "
                      f"billed ${made.billed_cost:,.2f}, effective ${made.effective_cost:,.2f}")
        paths.append(made.path)
    if not paths:
        raise InputError("give --focus FILE (or --demo-bill OUT)")
    from ingest.lake import LakeWriter

    writer = LakeWriter(settings.lake_dir, quality=settings)
    result = ingest_focus_files(settings.lake_dir, paths, version=focus_version, writer=writer,
                                currency=settings.currency)
    table = Table(title="billing_focus")
    for col in ("provider", "billing period", "account", "rows", "billed (USD)", "effective (USD)", "run"):
        table.add_column(col)
    for run in result.runs:
        account = (run.billing_account or "-") + (f" / {run.sub_account}" if run.sub_account else "")
        table.add_row(run.provider, f"{run.period_start:%Y-%m-%d} .. {run.period_end:%Y-%m-%d}", account, str(run.rows),
                      f"{run.billed_cost:,.2f}", f"{run.effective_cost:,.2f}", run.run_id)
    console.print(table)
    for run in result.runs:
        if run.replaced is not None:
            console.print(f"replaced slice {run.slice_label}: {run.replaced.rows} rows from "
                          f"{', '.join(run.replaced.files) or '(unknown file)'} (run {', '.join(run.replaced.runs)})",
                          highlight=False, soft_wrap=True)
    for f in result.files:
        console.print(f"{f.path.name}: FOCUS {f.version}, {f.rows} rows, sha256 {f.file_hash[:12]}")


def register(app: typer.Typer) -> None:
    app.command("billing")(billing)
