"""``gpufinops demo``: write the demo fleet (replayed from public traces) into the lake."""

from __future__ import annotations

import os
from datetime import date, datetime
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.context import console, handle_errors, settings_of
from gpufinops.errors import InputError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def _date(text: str) -> date:
    try:
        return datetime.strptime(text, "%Y-%m-%d").date()
    except ValueError:
        raise InputError(f"--start must be YYYY-MM-DD, got {text!r}") from None


@handle_errors
def demo(
    ctx: typer.Context,
    days: int = typer.Option(14, "--days", envvar="GPUFINOPS_DEMO_DAYS", help="Days of data."),
    clusters: int = typer.Option(2, "--clusters", envvar="GPUFINOPS_DEMO_CLUSTERS", help="Clusters (aws, gcp, azure, then cycling)."),
    nodes: int = typer.Option(150, "--nodes", envvar="GPUFINOPS_DEMO_NODES", help="Nodes in all clusters together."),
    seed: int = typer.Option(42, "--seed", envvar="GPUFINOPS_DEMO_SEED", help="Random seed; same seed, same rows."),
    start: str = typer.Option("2026-11-01", "--start", envvar="GPUFINOPS_DEMO_START", help="First day (UTC midnight), YYYY-MM-DD."),
    snapshot_interval: int | None = typer.Option(
        None, "--snapshot-interval", "--k8s-interval", envvar="GPUFINOPS_DEMO_K8S_INTERVAL",
        help="Seconds between Kubernetes snapshots (default: the snapshot_interval_s setting, 60).",
    ),
    dcgm_interval: int = typer.Option(60, "--dcgm-interval", envvar="GPUFINOPS_DEMO_DCGM_INTERVAL", help="Seconds between DCGM / usage samples."),
    gpus_per_node: int | None = typer.Option(
        None, "--gpus-per-node", envvar="GPUFINOPS_DEMO_GPUS_PER_NODE", help="Make every node an N-GPU node (8 for the bench fleet)."),
    fleet: str = typer.Option("default", "--fleet", envvar="GPUFINOPS_DEMO_FLEET", help="default | bench (= --gpus-per-node 8)."),
    target_allocation: float = typer.Option(0.72, "--target-allocation", envvar="GPUFINOPS_DEMO_TARGET_ALLOCATION", help="GPU allocation the workload aims at."),
    hold_back_hours: int = typer.Option(0, "--hold-back-hours", envvar="GPUFINOPS_DEMO_HOLD_BACK_HOURS", help="Leave the window's last N hours out (the bench lands them later with --tail-only)."),
    tail_only: bool = typer.Option(False, "--tail-only", help="Write only the held-back last hours (needs --hold-back-hours)."),
    tail_hours: int | None = typer.Option(None, "--tail-hours", help="With --tail-only: only the first N held-back hours (the bench lands an hour at a time)."),
    workers: int = typer.Option(
        min(2, os.cpu_count() or 1), "--workers", envvar="GPUFINOPS_DEMO_WORKERS",
        help="Processes (clusters are generated in parallel; the rows do not depend on it)."),
    data_dir: Path | None = typer.Option(None, "--data-dir", envvar="GPUFINOPS_DEMO_DATA_DIR", help="Folder with openb/ and genai/ traces (default: <repo>/../shared/data)."),  # noqa: B008
    price_card: Path | None = typer.Option(None, "--price-card", envvar="GPUFINOPS_DEMO_PRICE_CARD", help="Price card CSV (default: seeds/price_card.csv)."),  # noqa: B008
) -> None:
    """Make the demo fleet in the lake from the real traces (idempotent for the same options)."""
    from ingest.demo.generate import DemoOptions, generate_demo

    settings = settings_of(ctx)
    if fleet not in ("default", "bench"):
        raise InputError(f"--fleet must be 'default' or 'bench', got {fleet!r}")
    opts = DemoOptions(
        days=days, clusters=clusters, nodes=nodes, seed=seed, start=_date(start),
        snapshot_interval_s=snapshot_interval or settings.snapshot_interval_s, dcgm_interval_s=dcgm_interval,
        gpus_per_node=gpus_per_node or (8 if fleet == "bench" else None), target_allocation=target_allocation,
        workers=workers, hold_back_hours=hold_back_hours, tail_only=tail_only, tail_hours=tail_hours,
    )
    if data_dir is not None:
        opts.data_dir = data_dir
    if price_card is not None:
        opts.price_card = price_card
    progress = Progress(
        TextColumn("[bold]demo[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
        TimeElapsedColumn(), console=console, transient=False,
    )
    with progress:
        task = progress.add_task("fleet and workload", total=None)
        summary = generate_demo(
            settings.lake_dir, opts,
            on_start=lambda n: progress.update(task, total=n),
            on_step=lambda label: progress.update(task, advance=1, description=label),
        )
    table = Table(title=f"demo fleet in {settings.lake_dir} ({summary.seconds:.1f}s)", show_header=False)
    table.add_row("clusters", ", ".join(summary.clusters))
    table.add_row("nodes", str(summary.nodes))
    table.add_row("GPUs by model", ", ".join(f"{m} {n}" for m, n in sorted(summary.gpus_by_model.items())))
    table.add_row("pods", f"{summary.pods:,} ({summary.pending_gpu_pods:,} GPU pods waited Pending)")
    for name, n in sorted(summary.rows.items()):
        table.add_row(f"rows {name}", f"{n:,}")
    console.print(table)
