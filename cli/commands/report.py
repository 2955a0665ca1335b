"""``gpufinops report --period weekly|monthly --audience finance|team:NAME [--send]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.context import console, err_console, handle_errors, parse_day, settings_of
from gpufinops.warehouse import connect, require_good_build

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command("report")
    @handle_errors
    def report(
        ctx: typer.Context,
        period: Annotated[str, typer.Option("--period", help="weekly | monthly")],
        audience: Annotated[str, typer.Option("--audience", help="finance | team:NAME")],
        send: Annotated[bool, typer.Option("--send", help="Deliver by e-mail / webhook as configured under `reports:`.")] = False,
        out: Annotated[Path | None, typer.Option("--out", help="Folder for the HTML and CSVs [default: <home>/reports].")] = None,
        as_of: Annotated[str | None, typer.Option("--as-of", help="Last day of the period, YYYY-MM-DD [default: last day with data].")] = None,
    ) -> None:
        """Write an HTML report with charts and CSVs for one audience; optionally send it."""
        from gpufinops.errors import InputError
        from gpufinops.views.budgets import load_budget_settings
        from reports.build import build_report
        from reports.config import load_report_settings
        from reports.delivery import channels_for

        if period not in ("weekly", "monthly"):
            raise InputError(f"--period {period!r}: use weekly or monthly")
        day = parse_day("--as-of", as_of)
        settings = settings_of(ctx)
        rs = load_report_settings(settings)
        require_good_build(settings.warehouse_path)  # no figures from a warehouse that lags the lake
        con = connect(settings.warehouse_path)
        try:
            rep = build_report(con, settings, load_budget_settings(settings), period, audience,  # type: ignore[arg-type]
                               as_of=day, dashboard_url=rs.dashboard_url)
        finally:
            con.close()
        folder = out or rs.out_dir or settings.home / "reports"
        folder = Path(folder) / rep.slug
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.html").write_text(rep.html())
        for name, data in rep.csvs().items():
            (folder / name).write_bytes(data)
        console.print(f"{rep.title}: {folder / 'report.html'} (+ {len(rep.tables)} CSV)")
        for alert in rep.alerts:
            err_console.print(f"[yellow]budget alert[/] {alert.text}", highlight=False)
        if send:
            for channel in channels_for(rep, rs):
                console.print(channel.send(rep))
