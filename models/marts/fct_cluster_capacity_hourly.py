"""Cluster capacity per hour: GPU capacity / allocated / unallocated, fragmentation and bin-packing.

Fragmentation (Weng et al., "Beware of Fragmentation", USENIX ATC '23), on the first snapshot of
each hour:
- per node, each physical GPU's free fraction R: whole-GPU pods take whole devices first; the
  other (fractional, MIG, time-sliced) equivalents are placed best-fit onto the devices in
  descending size (device-level assignment is not known from Kubernetes objects);
- task shapes M = distinct (CPU, k GPUs, d per-GPU fraction, allowed GPU models) of the workload
  pods present (system pods excluded; CPU-only pods included, as in the authors' simulator), by
  popularity, truncated at 95 % cumulative share and renormalised; the allowed models are the
  pod's GPU-model constraint, a `|`-separated list ('' = any model);
- F_n(m) = Σ_g R_ng if m needs no GPU or cannot run on n (CPU short, fewer than k GPUs with
  R ≥ d, model not allowed), else Σ_g R_ng·[R_ng < d]; F_n(M) = Σ_m p_m F_n(m); cluster F = Σ_n;
  rate = F / Σ R. The formula is gpufinops.capacity's, the one the placement simulator validates.
Bin-packing lower bound per node pool (gpufinops.capacity.pool_lower_bound): max(⌈ΣGPU/G⌉,
⌈ΣCPU/C⌉, ⌈ΣMem/M⌉) with (G, C, M) the pool's largest node shape (allocatable); nodes_in_use =
nodes with at least one non-system pod; the cluster's value is the sum over pools.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpufinops.capacity import TaskShape, node_fragmentation, parse_gpu_models, place_fractions, pool_lower_bound

_EPS = 1e-9
_SHARE = 0.95


def _free_matrix(nodes: pd.DataFrame, split_pods: pd.DataFrame) -> np.ndarray:
    """R: one row per node-hour, one column per device (NaN past the node's GPU count).

    ``nodes`` carries ``whole_pod_gpus``, the devices its whole-GPU pods hold (summed in
    int_capacity_snapshot_nodes); ``split_pods`` lists its other GPU pods (cluster, hour, node,
    gpu_equiv), whose whole part takes devices too and whose fractional part is placed best-fit."""
    gmax = int(nodes["gpu_capacity"].max()) if len(nodes) else 0
    gmax = max(gmax, 1)
    caps = nodes["gpu_capacity"].to_numpy(dtype=np.int64)
    cols = np.arange(gmax)
    free = np.where(cols[None, :] < caps[:, None], 1.0, np.nan)
    if not len(nodes):
        return free
    whole = nodes["whole_pod_gpus"].to_numpy(dtype=float) if "whole_pod_gpus" in nodes else np.zeros(len(nodes))
    rows = frac = np.zeros(0)
    if len(split_pods):
        key = ["cluster", "hour", "node"]
        index = pd.Series(np.arange(len(nodes)), index=pd.MultiIndex.from_frame(nodes[key]))
        found = index.reindex(pd.MultiIndex.from_frame(split_pods[key])).to_numpy()
        equiv = split_pods["gpu_equiv"].to_numpy(dtype=float)
        keep = ~np.isnan(found) & (equiv > 0)
        rows, equiv = found[keep].astype(np.int64), equiv[keep]
        floor = np.floor(equiv + _EPS)
        whole = whole + np.bincount(rows, weights=floor, minlength=len(nodes))
        frac = equiv - floor
    held = np.minimum(np.round(whole), caps)  # round half to even, as Python's round
    free[cols[None, :] < held[:, None]] = 0.0
    placed = frac > _EPS
    rows, frac = rows[placed], frac[placed]
    order = np.argsort(rows, kind="stable")
    rows, frac = rows[order], frac[order]
    if not len(rows):
        return free
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    for r, part in zip(rows[starts], np.split(frac, starts[1:]), strict=True):
        g = int(caps[r])
        if g == 0:
            continue
        dev = free[r, :g]
        place_fractions(dev, part.tolist())
        free[r, :g] = dev
    return free


def _shapes(pods: pd.DataFrame) -> pd.DataFrame:
    """Task shapes per (cluster, hour) with renormalised probabilities p. ``pods``: one row per
    workload pod, or per distinct (cluster, hour, cpu_request, gpu_equiv, model) with its count n."""
    gp = pods[~pods["is_system"].astype(bool)].copy() if "is_system" in pods else pods.copy()
    if gp.empty:
        return pd.DataFrame(columns=["cluster", "hour", "cpu", "k", "d", "model", "p"])
    e = gp["gpu_equiv"].to_numpy(dtype=float)
    gp["k"] = np.where(e >= 1 - _EPS, np.ceil(e - _EPS), np.where(e > _EPS, 1, 0)).astype(np.int64)
    gp["d"] = np.where(e >= 1 - _EPS, 1.0, np.round(np.clip(e, 0, None), 4))
    gp["cpu"] = np.round(gp["cpu_request"].to_numpy(dtype=float), 3)
    model = gp["gpu_model_constraint"] if "gpu_model_constraint" in gp else pd.Series("", index=gp.index)
    gp["model"] = model.fillna("").astype(str)
    gp["n"] = gp["n"].astype(np.int64) if "n" in gp else 1
    counts = gp.groupby(["cluster", "hour", "cpu", "k", "d", "model"])["n"].sum().reset_index()
    counts = counts.sort_values(["cluster", "hour", "n", "k", "d", "cpu"], ascending=[True, True, False, False, False, False])
    total = counts.groupby(["cluster", "hour"])["n"].transform("sum")
    cum = counts.groupby(["cluster", "hour"])["n"].cumsum()
    before = (cum - counts["n"]) / total
    kept = counts[before < _SHARE - _EPS].copy()
    kept["p"] = kept["n"] / kept.groupby(["cluster", "hour"])["n"].transform("sum")
    return kept[["cluster", "hour", "cpu", "k", "d", "model", "p"]]


def _fragmentation(nodes: pd.DataFrame, free: np.ndarray, shapes: pd.DataFrame) -> pd.DataFrame:
    out = []
    r = np.nan_to_num(free, nan=0.0)
    valid = ~np.isnan(free)
    total_free = r.sum(axis=1)
    cpu_free = nodes["cpu_free"].to_numpy(dtype=float)
    node_model = (nodes["gpu_model"] if "gpu_model" in nodes else pd.Series("", index=nodes.index)).fillna("").astype(str).to_numpy()
    groups = nodes.groupby(["cluster", "hour"], sort=False).indices
    shape_groups = shapes.groupby(["cluster", "hour"]).indices if len(shapes) else {}
    s_cpu, s_k, s_d, s_p = (shapes[c].to_numpy() for c in ("cpu", "k", "d", "p")) if len(shapes) else ((),) * 4
    s_model = (shapes["model"] if "model" in shapes else pd.Series("", index=shapes.index)).to_numpy()
    for key, idx in groups.items():
        rr, vv, tf, cf, nm = r[idx], valid[idx], total_free[idx], cpu_free[idx], node_model[idx]
        sh = shape_groups.get(key)
        if sh is None or not len(sh):
            frag = 0.0
        else:
            task_shapes = [
                TaskShape(cpu=float(s_cpu[i]), gpus=int(s_k[i]), per_gpu=float(s_d[i]),
                          models=parse_gpu_models(s_model[i]) if s_k[i] else None)
                for i in sh
            ]
            # The formula lives in one place: gpufinops.capacity (DESIGN §3, Weng et al.).
            frag = float(node_fragmentation(np.where(vv, rr, np.nan), cf, list(nm), task_shapes, [s_p[i] for i in sh]).sum())
        out.append((key[0], key[1], frag, float(tf.sum())))
    return pd.DataFrame(out, columns=["cluster", "hour", "fragmentation_gpus", "free_gpus"])


def _lower_bound(nodes: pd.DataFrame) -> pd.DataFrame:
    """Per (cluster, hour): nodes in use and the bin-packing lower bound summed over node pools, from
    the node rows (their pods' requests are summed in int_capacity_snapshot_nodes)."""
    key = ["cluster", "hour", "node_pool"]
    pools = nodes.assign(in_use=(nodes["workload_pods"] > 0).astype(np.int64)).groupby(key).agg(
        G=("gpu_capacity", "max"), C=("cpu_allocatable", "max"), M=("memory_allocatable_gib", "max"),
        gpu=("gpu_requested", "sum"), cpu=("cpu_requested", "sum"), mem=("memory_requested_gib", "sum"),
        nodes_in_use=("in_use", "sum"),
    )
    pools["nodes_lower_bound"] = [
        pool_lower_bound((gpu, cpu, mem), (G, C, M))
        for G, C, M, gpu, cpu, mem in pools[["G", "C", "M", "gpu", "cpu", "mem"]].itertuples(index=False)
    ]
    return pools.groupby(["cluster", "hour"])[["nodes_in_use", "nodes_lower_bound"]].sum().reset_index()


def _since_filter(dbt, session, lookback_hours: float, lake_clusters: list[str] | None) -> str | None:
    """Incremental run: a SQL filter keeping each cluster's hours from its newest hour in the target
    minus the lookback (a cluster not in the target yet: all of its hours), like the SQL models'
    ``incremental_since``: when every cluster of the lake is in the target, the oldest cutoff is
    added as a constant bound, the only part the engine can push into the scans below the views.
    Every output row depends only on its own (cluster, hour), so rebuilding those hours gives the
    rows a full build gives."""
    if not dbt.is_incremental:
        return None
    lookback_us = int(round(lookback_hours * 3600e6))
    rows = [(c, h) for c, h in _rows(session.sql(f"select cluster, max(hour) from {dbt.this} group by cluster"))
            if h is not None]
    cases = " ".join(
        f"when cluster = '{str(c).replace(chr(39), chr(39) * 2)}' then timestamp '{h}' - interval '{lookback_us} microseconds'"
        for c, h in rows
    )
    if not cases:
        return None
    since = f"hour >= (case {cases} else timestamp '0001-01-01 00:00:00' end)"
    if lake_clusters is not None and set(lake_clusters) <= {c for c, _ in rows}:
        since = f"hour >= timestamp '{min(h for _, h in rows)}' - interval '{lookback_us} microseconds' and {since}"
    return since


# The same code runs on DuckDB (dbt-duckdb: relations) and Spark (transform/spark.py's session
# submission: DataFrames); these three are the only engine-specific calls. The materialisation is
# set per engine in fct_cluster_capacity_hourly.yml.
def _pandas(rel) -> pd.DataFrame:
    if not hasattr(rel, "toPandas"):
        return rel.df()
    df = rel.toPandas()
    for f in rel.schema.fields:  # Spark hands timestamp_ntz over as Python objects
        if f.dataType.typeName().startswith("timestamp"):
            df[f.name] = pd.to_datetime(df[f.name])
    return df


def _rows(rel) -> list:
    return [tuple(r) for r in rel.collect()] if hasattr(rel, "collect") else rel.fetchall()


def _aggregate(rel, exprs: str, group: str):
    if hasattr(rel, "groupBy"):
        from pyspark.sql import functions as F

        keys = [g.strip() for g in group.split(",")]
        return rel.groupBy(*keys).agg(*[F.expr(e) for e in _split_top(exprs) if e not in keys])
    return rel.aggregate(exprs, group)


def _split_top(exprs: str) -> list[str]:
    """Split a select list at its top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in exprs:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    return [*out, cur.strip()] if cur.strip() else out


def model(dbt, session):
    lookback = float(dbt.config.meta_get("incremental_lookback_hours"))
    lake_clusters = dbt.config.meta_get("lake_clusters")  # a plain statement: dbt finds the key in the AST
    since = _since_filter(dbt, session, lookback, str(lake_clusters).split("|") if lake_clusters else None)

    def rel(r):
        return r.filter(since) if since else r

    nodes = _pandas(rel(dbt.ref("int_capacity_snapshot_nodes")))
    pods = rel(dbt.ref("int_capacity_snapshot_pods"))
    # the other GPU pods one by one (their whole part and fraction are split in _free_matrix), and
    # the workload pods counted per distinct shape input: the pods are never read one row each
    split_pods = _pandas(pods.filter("gpu_equiv > 0 and not is_whole").select("cluster", "hour", "node", "gpu_equiv"))
    shape_input = _pandas(_aggregate(pods.filter("not is_system"),
        "cluster, hour, cpu_request, gpu_equiv, gpu_model_constraint, count(*) as n",
        "cluster, hour, cpu_request, gpu_equiv, gpu_model_constraint",
    ))
    totals = _pandas(_aggregate(rel(dbt.ref("fct_node_hourly")),
        "hour, cluster, sum(coalesce(gpu_capacity, 0) * covered_hours) as gpu_capacity, "
        "sum(allocated_gpu_hours) as gpu_allocated, sum(unallocated_gpu_hours) as gpu_unallocated, "
        "sum(node_cost_usd) as node_cost_usd, sum(unallocated_cost_usd) as unallocated_cost_usd",
        "hour, cluster",
    ))
    pending = _pandas(rel(dbt.ref("int_pending_pods_hourly")))

    nodes = nodes.sort_values(["cluster", "hour", "node"]).reset_index(drop=True)
    free = _free_matrix(nodes, split_pods)
    frag = _fragmentation(nodes, free, _shapes(shape_input))
    snapshot_capacity = nodes.groupby(["cluster", "hour"])["gpu_capacity"].sum().rename("snapshot_gpu_capacity").reset_index()
    lb = _lower_bound(nodes) if len(nodes) else pd.DataFrame(columns=["cluster", "hour", "nodes_in_use", "nodes_lower_bound"])

    for part in (totals, frag, snapshot_capacity, lb, pending):  # one key dtype, whatever the engine handed over
        part["hour"] = pd.to_datetime(part["hour"])
    out = totals.merge(frag, on=["cluster", "hour"], how="left")
    out = out.merge(snapshot_capacity, on=["cluster", "hour"], how="left")
    out = out.merge(lb, on=["cluster", "hour"], how="left")
    out = out.merge(pending, on=["cluster", "hour"], how="left")
    out["fragmentation_rate"] = np.where(out["free_gpus"] > 0, out["fragmentation_gpus"] / out["free_gpus"].where(out["free_gpus"] > 0), 0.0)
    out.loc[out["free_gpus"].isna(), "fragmentation_rate"] = np.nan
    out["fragmentation_capacity_share"] = out["fragmentation_gpus"] / out["snapshot_gpu_capacity"].where(out["snapshot_gpu_capacity"] > 0)
    out["binpack_efficiency"] = out["nodes_lower_bound"] / out["nodes_in_use"].where(out["nodes_in_use"] > 0)
    # numbers, not objects, on both engines
    out["nodes_in_use"] = pd.to_numeric(out["nodes_in_use"]).astype("float64")
    out["nodes_lower_bound"] = pd.to_numeric(out["nodes_lower_bound"]).astype("Int64")
    out["binpack_efficiency"] = pd.to_numeric(out["binpack_efficiency"]).astype("float64")
    for c in ["pending_pods", "pending_gpu_pods"]:
        out[c] = out[c].fillna(0).astype("int64")
    cols = [
        "hour", "cluster", "gpu_capacity", "gpu_allocated", "gpu_unallocated", "fragmentation_gpus",
        "fragmentation_rate", "fragmentation_capacity_share", "free_gpus", "snapshot_gpu_capacity",
        "nodes_in_use", "nodes_lower_bound", "binpack_efficiency", "pending_pods", "pending_gpu_pods",
        "node_cost_usd", "unallocated_cost_usd",
    ]
    return out[cols].sort_values(["cluster", "hour"]).reset_index(drop=True)
