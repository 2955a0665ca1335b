"""``gpufinops recommend``: run the recommender over the warehouse and write the findings."""

from __future__ import annotations

import math
from typing import Annotated

import typer
from rich.table import Table

from cli.context import console, handle_errors, origin_of, settings_of
from gpufinops.errors import ConfigError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command("recommend")
    @handle_errors
    def recommend(
        ctx: typer.Context,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write nothing.")] = False,
        only: Annotated[list[str] | None, typer.Option("--only", help="Run only these strategies (repeatable).")] = None,
        top: Annotated[int, typer.Option("--top", help="How many recommendations to print.")] = 10,
        window_days: Annotated[float | None, typer.Option(
            "--window-days", envvar="GPUFINOPS_RECOMMEND_WINDOW_DAYS", help="History to analyse [default: 7].")] = None,
    ) -> None:
        """Write recommendations (stable ids: a re-run updates, never duplicates)."""
        from gpufinops.warehouse import require_good_build
        from recommender.engine import config_from_settings, run

        settings = settings_of(ctx)
        if window_days is not None and not (math.isfinite(window_days) and 0 < window_days <= 3660):
            src = origin_of(ctx, "window_days", "GPUFINOPS_RECOMMEND_WINDOW_DAYS", "--window-days")
            raise ConfigError(f"{src} {window_days!r}: give a number of days > 0 and at most 3660 (e.g. 7)")
        require_good_build(settings.warehouse_path)  # no findings from a warehouse that lags the lake
        config = config_from_settings(settings)
        if window_days is not None:
            config.loader.window_days = window_days
        with console.status("recommender: loading the warehouse and planning..."):
            summary = run(settings, config, only=only or None, dry_run=dry_run)
        _print(summary, top, dry_run)


def _print(summary, top: int, dry_run: bool) -> None:  # type: ignore[no-untyped-def]
    kinds = Table(title="Recommendations by kind" + (" (dry run: nothing written)" if dry_run else ""))
    kinds.add_column("kind")
    kinds.add_column("count", justify="right")
    kinds.add_column("est. monthly savings (USD)", justify="right")
    for kind, (n, usd) in sorted(summary.by_kind().items(), key=lambda kv: -kv[1][1]):
        kinds.add_row(kind, str(n), f"{usd:,.2f}")
    console.print(kinds)
    t = Table(title=f"Top {top} recommendations")
    for col in ("kind", "cluster", "namespace / workload", "tier", "proposed", "USD/month", "conf."):
        t.add_column(col, overflow="fold")
    for r in summary.recommendations[:top]:
        action = r.proposed.get("action") or r.proposed.get("mig_profile") or ", ".join(
            f"{k}={v}" for k, v in r.proposed.items() if k not in ("moves", "freed_nodes") and not isinstance(v, dict))
        if r.kind == "consolidate_nodes":
            action = f"free {len(r.proposed['freed_nodes'])} nodes, {len(r.proposed['moves'])} moves"
        t.add_row(r.kind, r.cluster, f"{r.namespace or '-'} / {r.workload or '-'}", r.tier or "-", str(action)[:60],
                  f"{r.est_monthly_savings_usd:,.2f}", f"{r.confidence:.2f}")
    console.print(t)
    if summary.written:
        w = summary.written
        console.print(f"written: {w['inserted']} new, {w['updated']} updated ({w['reopened']} reopened), "
                      f"{w['resolved']} resolved")
    if summary.window:
        console.print(f"window {summary.window[0]:%Y-%m-%d %H:%M} – {summary.window[1]:%Y-%m-%d %H:%M} UTC; "
                      f"timings (s): {summary.timings_s}")
