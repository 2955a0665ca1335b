"""``gpufinops budgets check [--as-of DAY] [--send]``: budget breaches, and their notices."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.context import console, handle_errors, parse_day, settings_of
from gpufinops.warehouse import connect, require_good_build

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Team and workload budgets against the warehouse's run rate and forecast.",
                        no_args_is_help=True)
    app.add_typer(group, name="budgets")

    @group.command("check")
    @handle_errors
    def check(
        ctx: typer.Context,
        send: Annotated[bool, typer.Option("--send", help="Send each new breach to the `reports:` channels "
                                                          "(once per breach and day; re-runs send nothing new).")] = False,
        as_of: Annotated[str | None, typer.Option("--as-of", help="Day to check, YYYY-MM-DD [default: last day with data].")] = None,
    ) -> None:
        """List the budgets exceeded by their trailing run rate or month-end forecast."""
        from gpufinops.appdb import open_app_db
        from gpufinops.views.budgets import evaluate, load_budget_settings
        from gpufinops.views.scope import Scope
        from reports.budget_alerts import send_breach_notices
        from reports.config import load_report_settings

        day = parse_day("--as-of", as_of)
        settings = settings_of(ctx)
        rs = load_report_settings(settings) if send else None
        if send:
            require_good_build(settings.warehouse_path)  # no notices from a warehouse that lags the lake
        engine = open_app_db(settings.effective_app_db_url)
        try:
            con = connect(settings.warehouse_path)
            try:
                status, found = evaluate(con.cursor(), Scope.everything(), load_budget_settings(settings), engine, day)
            finally:
                con.close()
            checked = len(status)
            when = status["day"].dropna().max() if checked else day
            console.print(f"{checked} budget(s) checked on {when}: {len(found)} breach(es)")
            for b in found:
                console.print(f"  breach {b.text}", highlight=False)
            if send and rs is not None:
                for d in send_breach_notices(engine, found, rs):
                    n = len(d.breach_ids)
                    console.print(f"  {d.audience} / {d.channel}: {d.result}" + (f" ({n} breach(es))" if n else ""),
                                  highlight=False)
        finally:
            engine.dispose()
