"""Read what the strategies need from the warehouse (marts) and the lake (per-minute evidence).

All SQL of the recommender lives here. The warehouse is opened through the kernel, read-only.
Costs, tiers and workloads come from the DESIGN §4 marts (``fct_gpu_allocation_hourly``,
``fct_node_hourly``); per-minute evidence (p95 utilisation, per-device p95, peak GPU memory,
CPU/memory histograms) and the latest pod/node snapshot (requests, selectors, tolerations,
annotations) come from the lake's Parquet files, read by DuckDB where they lie.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from pydantic import BaseModel, Field

from gpufinops.errors import ConfigError
from gpufinops.settings import Settings
from gpufinops.warehouse import connect
from recommender.histogram import CPU_SPEC, MEMORY_SPEC, DecayingHistogram
from recommender.model import (
    ClusterSnapshot,
    ContainerUsage,
    HourUsage,
    NodeShape,
    PodPlacement,
    RecommenderInput,
    Taint,
    Toleration,
    WorkloadGpuUsage,
)

__all__ = ["LoaderSettings", "load_input", "Loader"]

log = logging.getLogger("gpufinops.recommender")
_GIB = 1024.0**3


class LoaderSettings(BaseModel):
    window_days: float = Field(default=7.0, gt=0, description="history the strategies look at")
    histogram_half_life_hours: float = Field(default=24.0, gt=0)
    gpu_milli_annotation: str = "gpufinops.io/gpu-milli"
    checkpointed_annotation: str = "gpufinops.io/checkpointed"
    do_not_disrupt_annotation: str = "karpenter.sh/do-not-disrupt"
    pdb_annotation: str = "gpufinops.io/pdb"  # the snapshot has no PDB objects; see load_snapshots
    gpu_product_label: str = "nvidia.com/gpu.product"


def load_input(settings: Settings, loader_settings: LoaderSettings | None = None,
               now: datetime | None = None) -> RecommenderInput:
    with Loader(settings, loader_settings) as ld:
        return ld.load(now=now)


@dataclass
class _PodInfo:
    workload: str
    tier: str | None
    workload_kind: str | None
    gpu_model: str | None
    gpu_resource: str | None
    gpu_equiv: float


class Loader:
    def __init__(self, settings: Settings, loader_settings: LoaderSettings | None = None):
        self.settings = settings
        self.cfg = loader_settings or LoaderSettings()
        self.lake = Path(settings.lake_dir)
        self.con: duckdb.DuckDBPyConnection | None = None
        self._registered: list[str] = []
        self.query_seconds: list[tuple[str, float]] = []  # (query head, seconds): for the benchmark
        self._containers_cache: dict[tuple[str, str, str], list[dict[str, Any]]] = {}

    def __enter__(self) -> Loader:
        self.con = connect(self.settings.warehouse_path)
        try:  # naive `timestamp` marts hold UTC; make comparisons with aware datetimes agree with that
            self.con.execute("set enable_progress_bar = false")
            self.con.execute("set TimeZone = 'UTC'")
        except duckdb.Error:
            log.debug("could not set the DuckDB session time zone", exc_info=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.con is not None:
            self.con.close()

    # ------------------------------------------------------------------------------------------
    def _q(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        assert self.con is not None
        t0 = time.perf_counter()
        tbl = self.con.sql(sql, params=params or None).to_arrow_table()
        self.query_seconds.append((" ".join(sql.split())[:80], round(time.perf_counter() - t0, 3)))
        return tbl.to_pylist()

    def _has(self, relation: str) -> bool:
        rows = self._q("select count(*) as n from information_schema.tables where table_name = ?", [relation])
        return bool(rows[0]["n"])

    def _columns(self, relation: str) -> set[str]:
        return {r["column_name"] for r in self._q(
            "select column_name from information_schema.columns where table_name = ?", [relation])}

    def _files(self, table: str, since_day: str | None = None, latest_day_only: bool = False) -> list[str]:
        """Parquet files of a landing table; partition pruning on the ``day=`` directory names."""
        out: list[str] = []
        root = self.lake / table
        if not root.is_dir():
            return out
        for cdir in sorted(root.glob("cluster=*")):
            days = sorted(d for d in cdir.glob("day=*") if d.is_dir() and any(d.glob("*.parquet")))
            if since_day:
                days = [d for d in days if d.name.removeprefix("day=") >= since_day]
            if latest_day_only and days:
                days = days[-1:]
            for d in days:
                out.extend(str(f) for f in sorted(d.glob("*.parquet")))
        return out

    @staticmethod
    def _scan(files: list[str]) -> str:
        return "read_parquet([" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "], union_by_name=true)"

    # ------------------------------------------------------------------------------------------
    def load(self, now: datetime | None = None) -> RecommenderInput:
        for rel in ("fct_gpu_allocation_hourly", "fct_node_hourly"):
            if not self._has(rel):
                raise ConfigError(f"warehouse {self.settings.warehouse_path} has no {rel}; run `gpufinops build` first")
        end_row = self._q("select max(hour) as h from fct_gpu_allocation_hourly")[0]["h"]
        if end_row is None:
            raise ConfigError("fct_gpu_allocation_hourly is empty: ingest data (or `gpufinops demo`) and build first")
        window_end = _utc(end_row) + timedelta(hours=1)
        window_start = window_end - timedelta(days=self.cfg.window_days)
        now = now or datetime.now(UTC)
        pods = self._pod_map(window_start)
        snapshots = self.load_snapshots(pods)
        gpu = self._gpu_usage(window_start, window_end, pods, snapshots)
        containers = self._container_usage(window_start, window_end, pods, snapshots)
        return RecommenderInput(now=now, window_start=window_start, window_end=window_end, gpu_usage=tuple(gpu),
                                container_usage=tuple(containers), snapshots=tuple(snapshots))

    def snapshots(self) -> list[ClusterSnapshot]:
        """The latest snapshot of every cluster, with tiers from the warehouse (for the binpack view)."""
        if not self._has("fct_gpu_allocation_hourly"):
            raise ConfigError(f"warehouse {self.settings.warehouse_path} has no fct_gpu_allocation_hourly; run `gpufinops build` first")
        end = self._q("select max(hour) as h from fct_gpu_allocation_hourly")[0]["h"]
        since = (_utc(end) if end is not None else datetime.now(UTC)) - timedelta(days=self.cfg.window_days)
        return self.load_snapshots(self._pod_map(since))

    def _pod_map(self, since: datetime) -> dict[tuple[str, str, str], _PodInfo]:
        cols = self._columns("fct_gpu_allocation_hourly")
        equiv = "max(gpu_equiv)" if "gpu_equiv" in cols else "max(gpu_hours)"  # a full hour's gpu_hours = equiv
        rows = self._q(f"""
            select cluster, namespace, pod,
                   arg_max(workload, hour) as workload, arg_max(tier, hour) as tier,
                   arg_max(workload_kind, hour) as workload_kind, arg_max(gpu_model, hour) as gpu_model,
                   arg_max(gpu_resource, hour) as gpu_resource, {equiv} as gpu_equiv
            from fct_gpu_allocation_hourly where hour >= ?
            group by cluster, namespace, pod""", [since])
        return {(r["cluster"], r["namespace"], r["pod"]): _PodInfo(
            r["workload"] or r["pod"], r["tier"], r["workload_kind"], r["gpu_model"], r["gpu_resource"],
            float(r["gpu_equiv"] or 0.0)) for r in rows}

    def _pod_map_sql(self, pods: dict[tuple[str, str, str], _PodInfo]) -> str:
        """The pod -> workload map, registered as an Arrow relation (a read-only connection
        cannot create tables; a registered relation needs no write)."""
        import pyarrow as pa

        assert self.con is not None
        keys = list(pods)
        tbl = pa.table({
            "cluster": [k[0] for k in keys], "namespace": [k[1] for k in keys], "pod": [k[2] for k in keys],
            "workload": [pods[k].workload for k in keys],
        }, schema=pa.schema([(c, pa.string()) for c in ("cluster", "namespace", "pod", "workload")]))
        name = f"_rec_podmap_{len(self._registered)}"
        self.con.register(name, tbl)
        self._registered.append(name)
        return name

    # -- latest snapshot --------------------------------------------------------------------------
    def load_snapshots(self, pods: dict[tuple[str, str, str], _PodInfo] | None = None) -> list[ClusterSnapshot]:
        pods = pods if pods is not None else {}
        node_files = self._files("k8s_nodes", latest_day_only=True)
        pod_files = self._files("k8s_pods", latest_day_only=True)
        if not node_files:
            return []
        prices = self._node_prices()
        nodes_by_cluster: dict[str, list[NodeShape]] = defaultdict(list)
        at: dict[str, datetime] = {}
        for r in self._q(f"""
                with latest as (select cluster, max(snapshot_ts) as ts from {self._scan(node_files)} group by cluster)
                select n.* from {self._scan(node_files)} n
                where (n.cluster, n.snapshot_ts) in (select (cluster, ts) from latest)"""):
            labels = _map(r.get("labels"))
            alloc = _map(r.get("allocatable")) or _map(r.get("capacity"))
            replicas = int(r.get("gpu_replicas") or 1)
            gpu_count = int(r.get("gpu_count") or 0)
            mig = bool(r.get("mig_config")) or any(k.startswith("nvidia.com/mig-") for k in alloc)
            nodes_by_cluster[r["cluster"]].append(NodeShape(
                name=r["node"], cluster=r["cluster"], node_pool=r.get("node_pool") or "(none)", allocatable=alloc,
                gpu_model=r.get("gpu_product") or labels.get(self.cfg.gpu_product_label), gpu_count=gpu_count,
                gpu_memory_mib=float(r.get("gpu_memory_mib") or 0), gpu_replicas=replicas, mig=mig, labels=labels,
                taints=tuple(Taint(t["key"], t.get("value"), t.get("effect") or "NoSchedule") for t in (r.get("taints") or [])),
                unschedulable=bool(r.get("unschedulable")), capacity_type=r.get("capacity_type") or "on_demand",
                instance_type=r.get("instance_type"), provider=r.get("provider"), region=r.get("region"),
                hourly_price_usd=prices.get((r["cluster"], r["node"]), 0.0),
            ))
            at[r["cluster"]] = _utc(r["snapshot_ts"])
        node_of = {(c, n.name): n for c, ns in nodes_by_cluster.items() for n in ns}
        pods_by_cluster: dict[str, list[PodPlacement]] = defaultdict(list)
        if pod_files:
            for r in self._q(f"""
                    with latest as (select cluster, max(snapshot_ts) as ts from {self._scan(pod_files)} group by cluster)
                    select p.* from {self._scan(pod_files)} p
                    where (p.cluster, p.snapshot_ts) in (select (cluster, ts) from latest)
                      and p.node is not null and coalesce(p.phase, 'Running') in ('Running', 'Pending')"""):
                self._containers_cache[(r["cluster"], r["namespace"], r["pod"])] = r.get("containers") or []
                node = node_of.get((r["cluster"], r["node"]))
                if node is None:
                    continue
                pods_by_cluster[r["cluster"]].append(self._placement(r, node, pods.get((r["cluster"], r["namespace"], r["pod"]))))
        return [ClusterSnapshot(cluster=c, at=at[c], nodes=tuple(ns), pods=tuple(pods_by_cluster.get(c, ())))
                for c, ns in sorted(nodes_by_cluster.items())]

    def _placement(self, r: dict[str, Any], node: NodeShape, info: _PodInfo | None) -> PodPlacement:
        ann = _map(r.get("annotations"))
        req = _effective_requests(r.get("containers") or [], r.get("init_containers") or [])
        milli = ann.get(self.cfg.gpu_milli_annotation)
        equiv = info.gpu_equiv if info else 0.0
        frac = 0.0
        if milli:
            try:
                frac = min(1.0, float(milli) / 1000.0)
            except ValueError:
                frac = equiv
            equiv = equiv or frac
        if frac >= 1.0:
            frac = 0.0
        return PodPlacement(
            cluster=r["cluster"], namespace=r["namespace"], pod=r["pod"], node=r["node"], requests=req,
            gpu_equiv=equiv, gpu_fraction=frac, tier=info.tier if info else None,
            owner_kind=r.get("owner_kind"), owner_name=r.get("owner_name"),
            node_selector=_map(r.get("node_selector")),
            tolerations=tuple(Toleration(t.get("key") or None, t.get("operator") or "Equal", t.get("value"),
                                         t.get("effect") or None) for t in (r.get("tolerations") or [])),
            do_not_disrupt=ann.get(self.cfg.do_not_disrupt_annotation, "").lower() == "true",
            pdb=ann.get(self.cfg.pdb_annotation) or None,
            checkpointed=ann.get(self.cfg.checkpointed_annotation, "").lower() == "true",
        )

    def _node_prices(self) -> dict[tuple[str, str], float]:
        """Hourly price of each node: its cost in the most recent full hours of ``fct_node_hourly``."""
        rows = self._q("""
            with last as (select max(hour) as h from fct_node_hourly)
            select cluster, node, max(node_cost_usd) as usd from fct_node_hourly, last
            where hour >= last.h - interval 3 hour group by cluster, node""")
        return {(r["cluster"], r["node"]): float(r["usd"] or 0.0) for r in rows}

    def _spot_prices(self) -> dict[tuple[str | None, str | None, str | None], dict[str, float]]:
        files = self._files("prices")
        if not files:
            return {}
        out: dict[tuple[str | None, str | None, str | None], dict[str, float]] = {}
        for r in self._q(f"""
                select provider, region, instance_type, capacity_type, arg_max(usd_per_hour, effective_from) as usd
                from {self._scan(files)} group by all"""):
            out.setdefault((r["provider"], r["region"], r["instance_type"]), {})[r["capacity_type"]] = float(r["usd"])
        return out

    # -- GPU usage --------------------------------------------------------------------------------
    def _gpu_usage(self, start: datetime, end: datetime, pods: dict[tuple[str, str, str], _PodInfo],
                   snaps: list[ClusterSnapshot]) -> list[WorkloadGpuUsage]:
        gpu_pods = {k: v for k, v in pods.items() if v.gpu_equiv > 0}
        if not gpu_pods:
            return []
        mart = self._q("""
            select cluster, namespace, workload, hour, sum(gpu_hours) as gpu_hours, sum(gpu_cost_usd) as gpu_cost,
                   sum(total_cost_usd) as total_cost, sum(measured_gpu_hours) as measured
            from fct_gpu_allocation_hourly where hour >= ? and hour < ? and gpu_hours > 0
            group by all order by hour""", [start, end])
        files = self._files("gpu_samples", since_day=start.date().isoformat())
        samples: dict[tuple[str, str, str, datetime], dict[str, Any]] = {}
        wl_stats: dict[tuple[str, str, str], dict[str, Any]] = {}
        dev_p95: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        if files:
            base = f"""s as (
                select g.cluster, g.namespace, g.pod, m.workload, date_trunc('hour', g.ts) as hour,
                       coalesce(g.gr_engine_active, g.gpu_util / 100.0) as u, g.fb_used_mib,
                       g.fb_used_mib + g.fb_free_mib as fb_total, g.hostname, g.uuid, g.gpu, g.mig_instance
                from {self._scan(files)} g join {self._pod_map_sql(gpu_pods)} m
                  on g.cluster = m.cluster and g.namespace = m.namespace and g.pod = m.pod
                where g.ts >= ? and g.ts < ?)"""
            # One scan, three groupings: per workload-hour, per workload, per pod device.
            for r in self._q(f"""with {base}
                    select cluster, namespace, workload, hour, pod, grouping(hour, pod) as g, avg(u) as mean,
                           approx_quantile(u, 0.95) as p95, count(*) as n, max(fb_used_mib) as fb,
                           max(fb_total) as fb_total
                    from s group by grouping sets ((cluster, namespace, workload, hour),
                                                   (cluster, namespace, workload),
                                                   (cluster, namespace, workload, pod, hostname, uuid, gpu, mig_instance))
                    """, [start, end]):
                key = (r["cluster"], r["namespace"], r["workload"])
                if r["g"] == 1:  # hour kept, pod rolled up
                    samples[(*key, _utc(r["hour"]))] = r
                elif r["g"] == 2:  # per device of a pod
                    dev_p95[key][r["pod"]].append(float(r["p95"]))
                else:
                    wl_stats[key] = r
        hourly: dict[tuple[str, str, str], list[HourUsage]] = defaultdict(list)
        for r in mart:
            key = (r["cluster"], r["namespace"], r["workload"])
            s = samples.get((*key, _utc(r["hour"])))
            hourly[key].append(HourUsage(
                hour=_utc(r["hour"]), util_mean=None if s is None else float(s["mean"]),
                util_p95=None if s is None else float(s["p95"]), samples=0 if s is None else int(s["n"]),
                fb_used_max_mib=None if s is None or s["fb"] is None else float(s["fb"]),
                gpu_hours=float(r["gpu_hours"]), gpu_cost_usd=float(r["gpu_cost"] or 0.0),
                total_cost_usd=float(r["total_cost"] or 0.0)))
        info_by_wl: dict[tuple[str, str, str], _PodInfo] = {}
        for (c, n, _p), i in gpu_pods.items():
            info_by_wl.setdefault((c, n, i.workload), i)
        latest = self._latest_by_workload(snaps, pods)
        prices = self._spot_prices()
        out = []
        for key, hours in hourly.items():
            info = info_by_wl.get(key)
            if info is None:
                continue
            st = wl_stats.get(key, {})
            placed = latest.get(key, [])
            node = placed[0][1] if placed else None
            whole = max((p.whole_gpus for p, n in placed if n.device_level_gpus), default=0)
            devs = max(dev_p95.get(key, {}).values(), key=len, default=[])
            price = prices.get((node.provider, node.region, node.instance_type)) if node else None
            out.append(WorkloadGpuUsage(
                cluster=key[0], namespace=key[1], workload=key[2], tier=info.tier or "unknown",
                workload_kind=info.workload_kind, gpu_model=info.gpu_model or (node.gpu_model if node else None),
                gpu_resource=info.gpu_resource, hourly=tuple(sorted(hours, key=lambda h: h.hour)),
                replicas=max(1, len(placed)), gpus_per_pod=whole,
                gpu_equiv_per_pod=max((p.gpu_equiv for p, _ in placed), default=info.gpu_equiv),
                device_p95=tuple(sorted(devs, reverse=True)),
                util_p95=_f(st.get("p95")), util_mean=_f(st.get("mean")), peak_fb_used_mib=_f(st.get("fb")),
                device_memory_mib=_f(st.get("fb_total")) or (node.gpu_memory_mib if node else None),
                checkpointed=any(p.checkpointed for p, _ in placed),
                capacity_type=node.capacity_type if node else None, instance_type=node.instance_type if node else None,
                on_demand_usd_per_hour=(price or {}).get("on_demand"), spot_usd_per_hour=(price or {}).get("spot"),
            ))
        return out

    @staticmethod
    def _latest_by_workload(snaps: list[ClusterSnapshot], pods: dict[tuple[str, str, str], _PodInfo]
                            ) -> dict[tuple[str, str, str], list[tuple[PodPlacement, NodeShape]]]:
        out: dict[tuple[str, str, str], list[tuple[PodPlacement, NodeShape]]] = defaultdict(list)
        for s in snaps:
            nodes = {n.name: n for n in s.nodes}
            for p in s.pods:
                info = pods.get((p.cluster, p.namespace, p.pod))
                wl = info.workload if info else (p.owner_name or p.pod)
                out[(p.cluster, p.namespace, wl)].append((p, nodes[p.node]))
        return out

    # -- CPU / memory -----------------------------------------------------------------------------
    def _container_usage(self, start: datetime, end: datetime, pods: dict[tuple[str, str, str], _PodInfo],
                         snaps: list[ClusterSnapshot]) -> list[ContainerUsage]:
        files = self._files("container_usage", since_day=start.date().isoformat())
        latest = self._latest_by_workload(snaps, pods)
        live = {k: v for k, v in pods.items() if (k[0], k[1], v.workload) in latest}  # only what still runs
        if not files or not live:
            return []
        ref = end.timestamp()
        hl = self.cfg.histogram_half_life_hours * 3600.0
        key_cols = "cluster, namespace, workload, container"
        # One scan: CPU histogram buckets per sample (decayed), and per pod-hour the sample count,
        # first/last time and peak memory (VPA keeps memory peaks per interval, not every sample).
        rows = self._q(f"""
            with j as (
                select m.cluster, m.namespace, m.workload, u.pod, u.container, u.ts, u.cpu_cores,
                       u.memory_working_set_bytes as mem, date_trunc('hour', u.ts) as hour,
                       {CPU_SPEC.bucket_sql('u.cpu_cores')} as cb,
                       pow(2.0, (epoch(u.ts) - {ref!r}) / {hl!r}) as w
                from {self._scan(files)} u join {self._pod_map_sql(live)} m
                  on u.cluster = m.cluster and u.namespace = m.namespace and u.pod = m.pod
                where u.ts >= ? and u.ts < ?)
            select {key_cols}, cb, pod, hour, grouping(pod, hour) as g,
                   sum(case when cpu_cores is not null then w end) as w, count(*) as n,
                   min(ts) as first, max(ts) as last, max(mem) as peak
            from j group by grouping sets (({key_cols}, cb), ({key_cols}, pod, hour))""", [start, end])
        cpu_b: dict[tuple, dict[int, float]] = defaultdict(dict)
        peaks: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
        agg: dict[tuple, dict[str, Any]] = {}
        for r in rows:
            k = (r["cluster"], r["namespace"], r["workload"], r["container"])
            if r["g"] != 0:
                if r["cb"] is not None and r["w"]:
                    cpu_b[k][int(r["cb"])] = float(r["w"])
                continue
            if r["peak"] is not None:
                peaks[k].append(((_utc(r["hour"]) + timedelta(hours=1)).timestamp(), float(r["peak"])))
            a = agg.setdefault(k, {"n": 0, "first": r["first"], "last": r["last"], "peak": 0.0})
            a["n"] += int(r["n"])
            a["first"], a["last"] = min(a["first"], r["first"]), max(a["last"], r["last"])
            a["peak"] = max(a["peak"], float(r["peak"] or 0.0))
        mem_b: dict[tuple, dict[int, float]] = {}
        for k, pk in peaks.items():
            h = DecayingHistogram(MEMORY_SPEC)
            arr = np.array(pk)
            h.add(arr[:, 1], arr[:, 0], reference=end, half_life_s=hl)
            mem_b[k] = h.weights
        stats = [{"cluster": k[0], "namespace": k[1], "workload": k[2], "container": k[3], **a} for k, a in agg.items()]
        rates = self._cpu_mem_rates(start, end, pods, snaps)
        out = []
        for r in stats:
            key = (r["cluster"], r["namespace"], r["workload"])
            placed = latest.get(key, [])
            if not placed:
                continue  # gone by now: nothing to right-size
            req = _container_requests(placed[0][0], r["container"], self._containers.get((r["cluster"], r["namespace"], placed[0][0].pod), []))
            tier = next((pods[(p.cluster, p.namespace, p.pod)].tier for p, _ in placed
                         if (p.cluster, p.namespace, p.pod) in pods), None) or "unknown"
            cpu_rate, mem_rate = rates.get(key, (0.0, 0.0))
            out.append(ContainerUsage(
                cluster=key[0], namespace=key[1], workload=key[2], container=r["container"], tier=tier,
                cpu_request=req[0], memory_request=req[1], memory_limit=req[2],
                cpu_buckets=cpu_b.get((*key, r["container"]), {}), memory_buckets=mem_b.get((*key, r["container"]), {}),
                samples=int(r["n"]), first_sample=_utc(r["first"]), last_sample=_utc(r["last"]),
                memory_peak=float(r["peak"] or 0.0), cpu_cost_usd_per_core_hour=cpu_rate,
                memory_cost_usd_per_gib_hour=mem_rate, replicas=len(placed)))
        return out

    @property
    def _containers(self) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
        """Per-container requests/limits of the latest snapshot's pods (filled by load_snapshots)."""
        return self._containers_cache

    def _cpu_mem_rates(self, start: datetime, end: datetime, pods: dict[tuple[str, str, str], _PodInfo],
                       snaps: list[ClusterSnapshot]) -> dict[tuple[str, str, str], tuple[float, float]]:
        """$ per requested core-hour and GiB-hour of each workload over the last day: the mart's
        CPU/memory cost over the requested quantity × pod-hours (a pod-hour row counts as one hour,
        so partial hours make the rate, and the saving, a little low — conservative)."""
        req: dict[tuple[str, str, str], tuple[float, float]] = {}
        for s in snaps:
            for p in s.pods:
                info = pods.get((p.cluster, p.namespace, p.pod))
                if info:
                    req[(p.cluster, p.namespace, info.workload)] = (p.requests.get("cpu", 0.0), p.requests.get("memory", 0.0))
        since = max(start, end - timedelta(hours=24))
        cols = self._columns("fct_gpu_allocation_hourly")
        if {"covered_hours", "cpu_request", "memory_request_gib"} <= cols:
            # The mart carries the billed quantities: rate = cost / (max(request, usage) × hours).
            usage = ("greatest(cpu_request, coalesce(cpu_usage_cores, 0))" if "cpu_usage_cores" in cols else "cpu_request",
                     "greatest(memory_request_gib, coalesce(memory_usage_gib, 0))" if "memory_usage_gib" in cols
                     else "memory_request_gib")
            rows = self._q(f"""
                select cluster, namespace, workload, sum(cpu_cost_usd) / nullif(sum({usage[0]} * covered_hours), 0) as cpu,
                       sum(memory_cost_usd) / nullif(sum({usage[1]} * covered_hours), 0) as mem
                from fct_gpu_allocation_hourly where hour >= ? and hour < ? group by all""", [since, end])
            return {(r["cluster"], r["namespace"], r["workload"]): (float(r["cpu"] or 0.0), float(r["mem"] or 0.0))
                    for r in rows}
        out = {}
        for r in self._q("""
                select cluster, namespace, workload, count(*) as pod_hours,
                       sum(cpu_cost_usd) as cpu, sum(memory_cost_usd) as mem
                from fct_gpu_allocation_hourly where hour >= ? and hour < ? group by all""", [since, end]):
            key = (r["cluster"], r["namespace"], r["workload"])
            cpu_req, mem_req = req.get(key, (0.0, 0.0))
            ph = float(r["pod_hours"] or 0)
            out[key] = (
                float(r["cpu"] or 0) / (cpu_req * ph) if cpu_req > 0 and ph > 0 else 0.0,
                float(r["mem"] or 0) / (mem_req / _GIB * ph) if mem_req > 0 and ph > 0 else 0.0,
            )
        return out


# ---------------------------------------------------------------------------------------------
# helpers


def _utc(ts: Any) -> datetime:
    if isinstance(ts, datetime):
        return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    raise TypeError(f"not a timestamp: {ts!r}")


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def _lit(v: str | None) -> str:
    return "null" if v is None else "'" + str(v).replace("'", "''") + "'"


def _map(v: Any) -> dict[str, Any]:
    """Arrow maps come back as lists of (key, value) pairs."""
    if v is None:
        return {}
    if isinstance(v, dict):
        return dict(v)
    return {k: val for k, val in v}


def _effective_requests(containers: list[dict[str, Any]], init: list[dict[str, Any]]) -> dict[str, float]:
    """Kubernetes: the sum over containers, or the largest init container if that is larger.
    Extended resources (GPUs) fall back to limits, which Kubernetes requires to equal requests."""
    def of(c: dict[str, Any]) -> dict[str, float]:
        req = {k: float(v) for k, v in _map(c.get("requests")).items() if v is not None}
        for k, v in _map(c.get("limits")).items():
            if k not in ("cpu", "memory") and k not in req and v is not None:
                req[k] = float(v)
        return req

    total: dict[str, float] = {}
    for c in containers:
        for k, v in of(c).items():
            total[k] = total.get(k, 0.0) + v
    for c in init:
        for k, v in of(c).items():
            total[k] = max(total.get(k, 0.0), v)
    return total


def _container_requests(pod: PodPlacement, container: str, containers: list[dict[str, Any]]
                        ) -> tuple[float | None, float | None, float | None]:
    for c in containers:
        if c.get("name") == container:
            req, lim = _map(c.get("requests")), _map(c.get("limits"))
            return req.get("cpu"), req.get("memory"), lim.get("memory")
    return None, None, None
