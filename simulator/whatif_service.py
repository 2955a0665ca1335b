"""A priced what-if for one fleet cluster: the simulator on the warehouse's nodes and pod shapes,
against a baseline, priced at the fleet's $/GPU-hour, stored under the home.

GPUs freed = (GPUs the scenario allocates − GPUs the baseline allocates) at the end of the arrival
of the window's workload (tuned to 130 % of capacity, ``final_alloc_pct``) − the GPUs the scenario adds to the inventory (so buying nodes is not "free").
A positive figure is capacity the fleet would not need to buy for the same work; it is priced as
GPUs freed × $/GPU-hour (``fct_node_hourly``: GPU cost ÷ GPU capacity-hours over the window) ×
730 h/month.

Storage: the latest result per cluster is a JSON file, ``<home>/whatif/<cluster>.json``, written
atomically (temp file + rename). A what-if is derived, reproducible from the warehouse and the
request, and replaced by the next run; nothing joins or queries it, so an app-DB table and a
migration would add schema to maintain without a reader that needs it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from simulator.engine import POLICIES
from simulator.report import simulate
from simulator.warehouse import gpu_hour_rate, load_fleet
from simulator.whatif import apply_inventory_changes

__all__ = ["WhatIfRequest", "run_whatif", "latest_whatif", "HOURS_PER_MONTH"]

HOURS_PER_MONTH = 730.0
_WINDOW = re.compile(r"^(\d+)([hdw])$")
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class WhatIfRequest(BaseModel):
    policy: str = Field(default="fgd", description=f"scheduler policy of the scenario: {', '.join(POLICIES)}")
    baseline_policy: str = Field(default="bestfit", description="policy of the baseline (today's placement model)")
    seeds: int = Field(default=3, ge=1, le=20)
    window: str = Field(default="7d", description="pod shapes seen in this window (h, d or w)")
    add_nodes: list[str] = Field(default_factory=list, description="N:MODEL or N:MODEL:GPUS:CPU_MILLI:MEMORY_MIB")
    remove_nodes: list[str] = Field(default_factory=list, description="N:MODEL")
    mig: list[str] = Field(default_factory=list, description="MODEL:SLICES")
    timeslice: list[str] = Field(default_factory=list, description="MODEL:REPLICAS")

    def window_delta(self) -> timedelta:
        m = _WINDOW.match(self.window.strip())
        if not m:
            raise ValueError(f"window {self.window!r} must be a number and a unit h, d or w (e.g. 7d)")
        n, unit = int(m.group(1)), m.group(2)
        return {"h": timedelta(hours=n), "d": timedelta(days=n), "w": timedelta(weeks=n)}[unit]


def _path(home: Path, cluster: str) -> Path:
    return Path(home) / "whatif" / f"{_SAFE.sub('_', cluster)}.json"


def run_whatif(home: Path, warehouse: Path, cluster: str, req: WhatIfRequest) -> dict[str, Any]:
    for p in (req.policy, req.baseline_policy):
        if p not in POLICIES:
            raise ValueError(f"policy {p!r}: choose from {', '.join(POLICIES)}")
    window = req.window_delta()
    inv, work = load_fleet(warehouse, cluster, window)
    if not len(work):
        raise ValueError(f"cluster {cluster!r} ran no GPU pods in the last {req.window}")
    scen_inv = apply_inventory_changes(load_fleet(warehouse, cluster, window)[0], add=req.add_nodes,
                                       remove=req.remove_nodes, mig=req.mig, timeslice=req.timeslice)
    base = simulate(inv, work, [req.baseline_policy], req.seeds)["policies"][req.baseline_policy]
    scen = simulate(scen_inv, work, [req.policy], req.seeds)["policies"][req.policy]
    base_alloc = base["final_alloc_pct"] / 100 * inv.total_gpus
    scen_alloc = scen["final_alloc_pct"] / 100 * scen_inv.total_gpus
    freed = scen_alloc - base_alloc - (scen_inv.total_gpus - inv.total_gpus)
    rate = gpu_hour_rate(warehouse, cluster, window)
    result = {
        "cluster": cluster,
        "computed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "request": req.model_dump(),
        "pods": len(work),
        "baseline": {"policy": req.baseline_policy, "gpus": inv.total_gpus, "nodes": len(inv), **base},
        "scenario": {"policy": req.policy, "gpus": scen_inv.total_gpus, "nodes": len(scen_inv), **scen},
        "gpus_freed": round(freed, 2),
        "usd_per_gpu_hour": round(rate, 4),
        "monthly_savings_usd": round(freed * rate * HOURS_PER_MONTH, 2),
    }
    path = _path(home, cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".whatif-", suffix=".json")
    with os.fdopen(fd, "w") as fh:
        json.dump(result, fh, indent=2)
    os.replace(tmp, path)
    return result


def latest_whatif(home: Path, cluster: str) -> dict[str, Any] | None:
    path = _path(home, cluster)
    if not path.exists():
        return None
    return json.loads(path.read_text())
