"""Benchmark: consolidate the full 1,213-node openb GPU cluster (Alibaba cluster-trace-gpu-v2023).

Pods of ``openb_pod_list_default.csv`` are placed in trace order by a *spreading* scheduler
(least-allocated node among those that fit: CPU, memory, GPU model, device-level GPU fit; best-fit
device within the node) until no more fit; then the recommender's packer consolidates each node
pool (one pool per GPU model). Reported: time, nodes before/after, the DESIGN §3 lower bound, the
gap, evictions, and the drain-FFD result alone for comparison.

``recommender_runtime(home)`` times one recommender run (no writes) over an existing warehouse,
e.g. the 1,000-node × 30-day bench warehouse.

Run: ``python -m bench.consolidation_openb [--time-limit S] [--pin-serving]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from recommender.model import ClusterSnapshot, NodeShape, PodPlacement
from recommender.packing import PackingSettings
from recommender.strategies.consolidate import ConsolidateSettings, plan_snapshot

__all__ = ["main", "load_openb", "spread_place", "recommender_runtime"]

_MIB = 1024.0**2
_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "openb"


def load_openb(data_dir: Path = _DATA) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    with (data_dir / "openb_node_list_gpu_node.csv").open(newline="") as fh:
        nodes = list(csv.DictReader(fh))
    with (data_dir / "openb_pod_list_default.csv").open(newline="") as fh:
        pods = list(csv.DictReader(fh))
    return nodes, pods


def _node_shapes(rows: list[dict[str, str]]) -> list[NodeShape]:
    return [NodeShape(
        name=r["sn"], cluster="openb", node_pool=r["model"],
        allocatable={"cpu": int(r["cpu_milli"]) / 1000.0, "memory": int(r["memory_mib"]) * _MIB,
                     "nvidia.com/gpu": float(r["gpu"])},
        gpu_model=r["model"], gpu_count=int(r["gpu"]), hourly_price_usd=1.0,  # one unit per node: savings in nodes
    ) for r in rows]


def spread_place(nodes: list[NodeShape], pod_rows: list[dict[str, str]]) -> tuple[list[PodPlacement], int]:
    """Place pods in trace order on the least-allocated node where they fit; returns (placed, skipped)."""
    n = len(nodes)
    cap = np.array([[x.allocatable["cpu"], x.allocatable["memory"]] for x in nodes])
    used = np.zeros_like(cap)
    gmax = max(x.gpu_count for x in nodes)
    dev = np.full((n, gmax), -1.0)
    for i, x in enumerate(nodes):
        dev[i, : x.gpu_count] = 1.0
    gpu_cap = np.array([max(x.gpu_count, 1) for x in nodes], float)
    models = np.array([x.gpu_model for x in nodes], dtype=object)
    placed: list[PodPlacement] = []
    skipped = 0
    for r in pod_rows:
        cpu, mem = int(r["cpu_milli"]) / 1000.0, int(r["memory_mib"]) * _MIB
        k, milli = int(r["num_gpu"]), int(r["gpu_milli"])
        spec = frozenset(s for s in (r.get("gpu_spec") or "").split("|") if s) or None
        ok = np.all(used + [cpu, mem] <= cap + 1e-9, axis=1)
        whole, frac = (k, 0.0) if (k > 0 and milli >= 1000) else (0, milli / 1000.0 if k > 0 else 0.0)
        if whole:
            ok &= (dev >= 1.0 - 1e-9).sum(axis=1) >= whole
        elif frac:
            ok &= dev.max(axis=1) >= frac - 1e-9
        if spec is not None and (whole or frac):
            ok &= np.isin(models, list(spec))
        if not ok.any():
            skipped += 1
            continue
        free_share = ((cap - used - [cpu, mem]) / cap).mean(axis=1) + (dev.clip(0).sum(axis=1) - whole - frac) / gpu_cap
        i = int(np.argmax(np.where(ok, free_share, -np.inf)))
        used[i] += [cpu, mem]
        if whole:
            idle = np.where(dev[i] >= 1.0 - 1e-9)[0][:whole]
            dev[i, idle] = 0.0
        elif frac:
            fits = np.where(dev[i] >= frac - 1e-9)[0]
            g = fits[np.argmin(dev[i, fits])]
            dev[i, g] -= frac
        req = {"cpu": cpu, "memory": mem}
        if whole:
            req["nvidia.com/gpu"] = float(whole)
        ls = r.get("qos") == "LS"
        placed.append(PodPlacement(
            cluster="openb", namespace="openb", pod=r["name"], node=nodes[i].name, requests=req,
            gpu_equiv=k * milli / 1000.0, gpu_fraction=frac, tier="serving" if ls else "batch",
            owner_kind="Deployment" if ls else "Job", owner_name=r["name"], gpu_models=spec,
        ))
    return placed, skipped


def main(time_limit_s: float = 20.0, pin_serving: bool = False, data_dir: Path = _DATA) -> dict[str, Any]:
    node_rows, pod_rows = load_openb(data_dir)
    nodes = _node_shapes(node_rows)
    t0 = time.perf_counter()
    pods, skipped = spread_place(nodes, pod_rows)
    t_place = time.perf_counter() - t0
    snap = ClusterSnapshot("openb", datetime(2023, 1, 1, tzinfo=UTC), tuple(nodes), tuple(pods))
    settings = PackingSettings(time_limit_s=time_limit_s, allow_serving_moves=not pin_serving)
    t1 = time.perf_counter()
    cap = ConsolidateSettings().max_evictions_per_node_freed  # the recommender's cap: a plan over it is not proposed
    plans = plan_snapshot(snap, settings, cap)
    t_pack = time.perf_counter() - t1
    in_use_before = len({p.node for p in pods})
    out: dict[str, Any] = {
        "nodes": len(nodes), "gpus": sum(x.gpu_count for x in nodes), "pods_in_trace": len(pod_rows),
        "pods_placed": len(pods), "pods_skipped": skipped, "place_s": round(t_place, 2),
        "nodes_in_use_before": in_use_before,
        "nodes_after": sum(p.nodes_after for p in plans),
        "lower_bound": sum(p.lower_bound for p in plans),
        "ffd_nodes_after": sum(int(p.stats["ffd_nodes_after"]) for p in plans),
        "evictions": sum(len(p.moves) for p in plans), "ffd_evictions": sum(int(p.stats["ffd_evictions"]) for p in plans),
        "consolidate_s": round(t_pack, 2), "time_limit_s_per_pool": time_limit_s,
        "search_time_s_per_pool": settings.search_time_s, "max_evictions_per_node_freed": cap,
        "serving_pinned": pin_serving,
        "pools": [{"pool": p.node_pool, "nodes": p.nodes_before, "after": p.nodes_after, "ffd_after": p.stats["ffd_nodes_after"],
                   "lower_bound": p.lower_bound, "gap": p.gap, "evictions": len(p.moves),
                   "evictions_per_node_freed": round(p.evictions_per_node_freed, 2), "solver": p.solver,
                   "search_closed": p.stats["search_closed"], "cp_sat_rounds": p.stats["cp_sat_rounds"],
                   "s": p.stats["total_s"]} for p in plans],
    }
    out["gap"] = out["nodes_after"] - out["lower_bound"]
    out["gap_pct"] = round(100.0 * out["gap"] / out["lower_bound"], 2)
    out["nodes_freed"] = len(nodes) - out["nodes_after"]
    out["evictions_per_node_freed"] = round(out["evictions"] / max(out["nodes_freed"], 1), 2)
    out["over_eviction_cap"] = [p.node_pool for p in plans if p.evictions_per_node_freed > cap]
    return out


def recommender_runtime(home: Path) -> dict[str, Any]:
    """One recommender run over the warehouse under ``home`` (dry run: nothing written)."""
    from gpufinops.settings import Settings
    from recommender.engine import run

    t0 = time.perf_counter()
    summary = run(Settings(home=home), dry_run=True)
    return {"recommender_s": round(time.perf_counter() - t0, 2), "recommendations": len(summary.recommendations),
            "timings_s": summary.timings_s}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=20.0, help="CP-SAT seconds per node pool")
    ap.add_argument("--pin-serving", action="store_true", help="LS (serving) pods do not move")
    ap.add_argument("--recommender-home", type=Path, help="also time a recommender run over this home")
    a = ap.parse_args()
    result = main(a.time_limit, a.pin_serving)
    if a.recommender_home:
        result["recommender"] = recommender_runtime(a.recommender_home)
    print(json.dumps(result, indent=2))
