"""``gpufinops build [--full] [--select ...]``: dbt build (seeds, models, data tests), then a showback summary."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from cli.context import console, handle_errors, settings_of

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("build")(build)


@handle_errors
def build(
    ctx: typer.Context,
    full: Annotated[bool, typer.Option("--full", help="Rebuild every model from the lake (dbt --full-refresh).")] = False,
    select: Annotated[list[str] | None, typer.Option("--select", "-s", help="dbt selection (repeatable).")] = None,
    summary: Annotated[bool, typer.Option("--summary/--no-summary", help="Print the showback summary.")] = True,
    unit_tests: Annotated[bool, typer.Option("--unit-tests", help="Also run the dbt unit tests (formula pins).")] = False,
    engine: Annotated[str | None, typer.Option("--engine", help="duckdb | spark (default: the `engine` setting).")] = None,
    all_tests: Annotated[bool, typer.Option(
        "--all-tests", help="Run every data test on an incremental build too (the nightly run); by default "
                            "an incremental build runs the invariants only (the hourly_tests setting).")] = False,
    in_process: Annotated[bool, typer.Option(
        "--in-process", help="Build in this process even when a build worker (`gpufinops serve builder`) "
                             "serves the home.")] = False,
) -> None:
    """Build the warehouse from the lake (incremental by default) and run its data tests.

    When a build worker (`gpufinops serve builder`) serves the home, the build runs there (dbt already
    imported, the project already parsed) and this process only prints what it returns."""
    settings = settings_of(ctx)
    if engine not in (None, "duckdb", "spark"):
        raise typer.BadParameter(f"--engine must be duckdb or spark, not {engine!r}")
    if not in_process and (engine or settings.engine) == "duckdb":
        from transform.worker import WorkerUnavailable, config_of, remote_build, result_from_answer, summary_from_answer

        try:
            with console.status("dbt build in the build worker ..."):
                answer = remote_build(settings.home, config=config_of(settings), full=full, select=select, unit_tests=unit_tests,
                                      all_tests=all_tests, summary=summary and not select)
        except WorkerUnavailable:
            pass
        else:
            _report(result_from_answer(answer), summary_from_answer(answer), worker=answer.get("worker_pid"))
            return
    _build_here(settings, full=full, select=select, summary=summary, unit_tests=unit_tests, engine=engine,
                all_tests=all_tests)


def _build_here(settings, *, full: bool, select: list[str] | None, summary: bool, unit_tests: bool,  # noqa: ANN001
                engine: str | None, all_tests: bool) -> None:
    from transform import run_build, showback_summary

    with console.status("dbt build (seeds, models, tests) ...") as status:

        def rollup_progress(done: int, total: int) -> None:
            status.update(f"hourly rollups of the lake: {done:,} / {total:,} files"
                          + (" ..." if done < total else "; dbt build (seeds, models, tests) ..."))

        result = run_build(settings, full_refresh=full, select=select, unit_tests=unit_tests, engine=engine,
                           all_tests=all_tests, rollup_progress=rollup_progress)
    _report(result, showback_summary(result.warehouse) if summary and not select else None)


def _report(result, summary, worker: int | None = None) -> None:  # noqa: ANN001 - BuildResult, ShowbackSummary
    if result.rollups.get("written") or result.rollups.get("removed"):
        console.print(f"hourly rollups: {result.rollups['written']:,} written, {result.rollups['removed']:,} "
                      f"removed in {result.rollup_seconds:.1f}s (a lake from before rollups, or new rollup SQL)")
    console.print(
        f"built and published version {result.version} of {result.warehouse} in {result.seconds:.1f}s "
        f"({'full refresh' if result.full_refresh else f'incremental, copy {result.copy_seconds:.2f}s'}): "
        f"{result.count('model')} models, {result.count('test')} data tests"
        f"{' (the invariants; --all-tests for every one)' if result.tests_scope == 'invariants' else ''}, "
        f"{result.count('unit_test')} unit tests, {len(result.failed)} failed"
        f"{f' (in the build worker, pid {worker})' if worker else ''}"
    )
    if result.note:
        console.print(f"[yellow]note:[/] {result.note}")
    for n in result.failed:  # only reached for quarantined data tests
        console.print(f"[yellow]warning:[/] {n.resource_type} {n.name}: {n.status} ({n.failures} rows)")
    if summary is not None:
        _print_summary(summary)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}%"


def _print_summary(s) -> None:  # noqa: ANN001 - transform.ShowbackSummary
    head = Table(title=f"Showback {s.first_day} .. {s.last_day} ({s.clusters} clusters)", show_header=False)
    head.add_row("node cost", f"${s.node_cost_usd:,.2f}")
    head.add_row("GPU cost", f"${s.gpu_cost_usd:,.2f}")
    head.add_row("chargeback total (incl. overhead)", f"${s.chargeback_usd:,.2f}")
    head.add_row("GPU-hours capacity / allocated", f"{s.gpu_capacity_hours:,.1f} / {s.allocated_gpu_hours:,.1f}")
    head.add_row("idle-allocated (of measured)", _pct(s.idle_allocated_pct))
    head.add_row("unallocated (of capacity)", _pct(s.unallocated_pct))
    head.add_row("unmeasured GPU-hours", f"{s.unmeasured_gpu_hours:,.1f}")
    head.add_row("unpriced nodes", str(s.unpriced_nodes))
    console.print(head)
    tenants = Table(title="Top tenants by chargeback")
    for col in ("tenant", "GPU-hours", "chargeback", "idle %"):
        tenants.add_column(col, justify="left" if col == "tenant" else "right")
    for t in s.top_tenants:
        tenants.add_row(t.tenant, f"{t.gpu_hours:,.1f}", f"${t.chargeback_usd:,.2f}", _pct(t.idle_allocated_pct))
    console.print(tenants)
