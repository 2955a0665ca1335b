"""``gpufinops simulate``: replay a workload onto nodes under scheduler policies (what-if)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer

from cli.context import console, handle_errors, settings_of

__all__ = ["register"]

_WINDOW = re.compile(r"^(\d+)([hdw])$")


def _window(text: str) -> timedelta:
    from simulator.inputs import SimInputError

    m = _WINDOW.match(text.strip())
    if not m:
        raise SimInputError(f"--window {text!r} must be a number and a unit h, d or w (e.g. 7d)")
    n, unit = int(m.group(1)), m.group(2)
    return {"h": timedelta(hours=n), "d": timedelta(days=n), "w": timedelta(weeks=n)}[unit]


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    @handle_errors
    def simulate(
        ctx: typer.Context,
        nodes: Annotated[Path | None, typer.Option("--nodes", help="openb node list CSV (sn, cpu_milli, memory_mib, gpu, model).")] = None,
        pods: Annotated[Path | None, typer.Option("--pods", help="openb pod list CSV (name, cpu_milli, memory_mib, num_gpu, gpu_milli[, gpu_spec]).")] = None,
        cluster: Annotated[str | None, typer.Option("--cluster", help="Simulate this fleet cluster from the warehouse marts.")] = None,
        window: Annotated[str, typer.Option("--window", help="Pod shapes seen in this window (with --cluster).")] = "7d",
        policy: Annotated[list[str] | None, typer.Option("--policy", help="Policies to run (repeatable) [default: all six].")] = None,
        seeds: Annotated[int, typer.Option("--seeds", min=1, help="Seeds per policy (42, 43, ...).")] = 10,
        add_nodes: Annotated[list[str] | None, typer.Option("--add-nodes", help="N:MODEL or N:MODEL:GPUS:CPU_MILLI:MEMORY_MIB.")] = None,
        remove_nodes: Annotated[list[str] | None, typer.Option("--remove-nodes", help="N:MODEL.")] = None,
        mig: Annotated[list[str] | None, typer.Option("--mig", help="MODEL:SLICES, a MIG layout of equal slices.")] = None,
        timeslice: Annotated[list[str] | None, typer.Option("--timeslice", help="MODEL:REPLICAS, time-slicing.")] = None,
        constrain: Annotated[str | None, typer.Option("--constrain", help="MODEL[|MODEL][@PCT]: GPU pods ask for these models.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
        chart: Annotated[Path | None, typer.Option("--chart", help="Allocation-curve PNG [default: simulate.png under the home].")] = None,
    ) -> None:
        """Allocated GPUs at the end of the arrival and FGD fragmentation at 100 % arrival, per policy (means over seeds)."""
        from simulator.engine import POLICIES
        from simulator.inputs import SimInputError, load_openb_nodes, load_openb_pods
        from simulator.report import format_table
        from simulator.report import simulate as run
        from simulator.whatif import apply_constraint, apply_inventory_changes

        if cluster is None and (nodes is None or pods is None):
            raise SimInputError("give --nodes FILE --pods FILE, or --cluster C [--window 7d]")
        if cluster is not None and (nodes is not None or pods is not None):
            raise SimInputError("--cluster reads the warehouse; do not combine it with --nodes/--pods")
        settings = settings_of(ctx)
        if cluster is not None:
            from simulator.warehouse import load_fleet

            inv, work = load_fleet(settings.warehouse_path, cluster, _window(window))
        else:
            inv, work = load_openb_nodes(nodes), load_openb_pods(pods)  # type: ignore[arg-type]
        inv = apply_inventory_changes(inv, add=add_nodes or [], remove=remove_nodes or [], mig=mig or [],
                                      timeslice=timeslice or [])
        work = apply_constraint(work, constrain)
        chosen = policy or list(POLICIES)
        bad = [p for p in chosen if p not in POLICIES]
        if bad:
            raise SimInputError(f"--policy {', '.join(bad)}: choose from {', '.join(POLICIES)}")
        result = run(inv, work, chosen, seeds)
        if as_json:
            typer.echo(json.dumps(result))
            return
        console.print(format_table(result))
        out = chart or Path(settings.home) / "simulate.png"
        from simulator.chart import write_chart

        write_chart(result, out)
        console.print(f"chart: {out}")
