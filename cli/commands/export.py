"""``gpufinops export focus --start DAY --end DAY --out FILE [--format csv|parquet]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.context import console, handle_errors, settings_of
from gpufinops.warehouse import connect

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    export_app = typer.Typer(help="Export the warehouse in other tools' formats.", no_args_is_help=True)
    app.add_typer(export_app, name="export")

    @export_app.command("focus")
    @handle_errors
    def focus(
        ctx: typer.Context,
        start: Annotated[str, typer.Option("--start", help="First charge day, YYYY-MM-DD.")],
        end: Annotated[str, typer.Option("--end", help="Last charge day (inclusive), YYYY-MM-DD.")],
        out: Annotated[Path, typer.Option("--out", help="File to write (written aside, then renamed).")],
        fmt: Annotated[str | None, typer.Option("--format", help="csv | parquet [default: from --out's suffix, else csv].")] = None,
    ) -> None:
        """FOCUS 1.3 rows with the split cost allocation of every node charge over namespaces and workloads."""
        from exports.focus import parse_day, write_export

        settings = settings_of(ctx)
        con = connect(settings.warehouse_path)
        try:
            res = write_export(con, parse_day(start, "--start"), parse_day(end, "--end"), out, fmt)
        finally:
            con.close()
        console.print(
            f"FOCUS 1.3 export: {res.path} ({res.rows} rows: {res.allocated_rows} allocated, "
            f"{res.passthrough_rows} passed through; origin {'+'.join(res.charge_origins)}); "
            f"BilledCost {res.billed_cost:,.2f}, EffectiveCost {res.effective_cost:,.2f}",
            highlight=False,
        )
