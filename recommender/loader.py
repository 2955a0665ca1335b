"""Read what the strategies need from the warehouse marts, and nothing else.

All SQL of the recommender lives here. The warehouse is opened read-only through the kernel
(``gpufinops.warehouse.connect``). Every number is one the warehouse computed:

- GPU evidence: ``fct_workload_gpu_hourly`` (per workload-hour: GPU-hours, cost, samples, mean / p95
  utilisation, peak framebuffer) and, for the analysis window, the warehouse's table macros
  ``gpu_workload_evidence_window`` / ``gpu_device_evidence_window`` (exact merged-histogram p95s);
- CPU / memory histograms: ``fct_container_usage_hourly`` (VPA bucket counts per hour; the loader
  only applies the strategy's half-life decay, :func:`recommender.histogram.decay_sql`);
- the latest placements: ``fct_nodes_latest`` and ``fct_pods_latest`` (effective requests from
  ``int_pod_specs``, GPU-equivalent, node prices);
- spot prices: ``fct_instance_prices_latest``; CPU / memory rates: ``fct_gpu_allocation_hourly``;
- the MIG table: the ``mig_profiles`` seed (``recommender.mig.load_mig_profiles``).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
from pydantic import BaseModel, Field

from gpufinops.errors import ConfigError
from gpufinops.settings import Settings
from gpufinops.warehouse import connect
from recommender.histogram import decay_sql
from recommender.mig import load_mig_profiles
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

__all__ = ["LoaderSettings", "load_input", "Loader", "REQUIRED_MARTS"]

log = logging.getLogger("gpufinops.recommender")

REQUIRED_MARTS = ("fct_gpu_allocation_hourly", "fct_workload_gpu_hourly", "fct_container_usage_hourly",
                  "fct_nodes_latest", "fct_pods_latest", "fct_instance_prices_latest", "mig_profiles")

_Key = tuple[str, str, str]  # cluster, namespace, workload


class LoaderSettings(BaseModel):
    window_days: float = Field(default=7.0, gt=0, description="history the strategies look at")
    histogram_half_life_hours: float = Field(default=24.0, gt=0)
    gpu_product_label: str = "nvidia.com/gpu.product"
    # DuckDB's memory for the evidence queries (it spills to a temp folder beyond it); None: DuckDB's
    # default (80 % of RAM), which lets its buffer pool grow past what the recommender itself holds
    duckdb_memory_limit: str | None = "1GB"


def load_input(settings: Settings, loader_settings: LoaderSettings | None = None,
               now: datetime | None = None) -> RecommenderInput:
    with Loader(settings, loader_settings) as ld:
        return ld.load(now=now)


class Loader:
    def __init__(self, settings: Settings, loader_settings: LoaderSettings | None = None):
        self.settings = settings
        self.cfg = loader_settings or LoaderSettings()
        self.con: duckdb.DuckDBPyConnection | None = None
        self.query_seconds: list[tuple[str, float]] = []  # (query head, seconds): for the benchmark
        self._family: dict[tuple[str, str], str | None] = {}  # (cluster, node) -> gpu_family

    def __enter__(self) -> Loader:
        self.con = connect(self.settings.warehouse_path, read_only=True)
        self.con.execute("set enable_progress_bar = false")
        if self.cfg.duckdb_memory_limit:
            self.con.execute(f"set memory_limit = '{self.cfg.duckdb_memory_limit}'")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.con is not None:
            self.con.close()

    def _q(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        assert self.con is not None
        t0 = time.perf_counter()
        tbl = self.con.sql(sql, params=params or None).to_arrow_table()
        self.query_seconds.append((" ".join(sql.split())[:80], round(time.perf_counter() - t0, 3)))
        return tbl.to_pylist()

    # ------------------------------------------------------------------------------------------
    def load(self, now: datetime | None = None) -> RecommenderInput:
        assert self.con is not None
        present = {r["table_name"] for r in self._q("select table_name from information_schema.tables")}
        missing = [m for m in REQUIRED_MARTS if m not in present]
        if missing:
            raise ConfigError(f"warehouse {self.settings.warehouse_path} has no {', '.join(missing)}; "
                              "run `gpufinops build` first")
        end_row = self._q("select max(hour) as h from fct_gpu_allocation_hourly")[0]["h"]
        if end_row is None:
            raise ConfigError("fct_gpu_allocation_hourly is empty: ingest data (or `gpufinops demo`) and build first")
        window_end = _naive(end_row) + timedelta(hours=1)
        window_start = window_end - timedelta(days=self.cfg.window_days)
        snapshots, placed, containers = self._snapshots()
        gpu = self._gpu_usage(window_start, window_end, placed)
        usage = self._container_usage(window_start, window_end, placed, containers)
        return RecommenderInput(
            now=now or datetime.now(UTC), window_start=_utc(window_start), window_end=_utc(window_end),
            gpu_usage=tuple(gpu), container_usage=tuple(usage), snapshots=tuple(snapshots),
            mig_profiles=load_mig_profiles(self.con))

    # -- latest placements ------------------------------------------------------------------------
    def _snapshots(self) -> tuple[list[ClusterSnapshot], dict[_Key, list[tuple[PodPlacement, NodeShape]]],
                                  dict[tuple[str, str, str], list[dict[str, Any]]]]:
        nodes_by_cluster: dict[str, list[NodeShape]] = defaultdict(list)
        at: dict[str, datetime] = {}
        for r in self._q("select * from fct_nodes_latest order by cluster, node"):
            labels = _map(r["labels"])
            nodes_by_cluster[r["cluster"]].append(NodeShape(
                name=r["node"], cluster=r["cluster"], node_pool=r["node_pool"],
                allocatable={k: float(v) for k, v in _map(r["allocatable"]).items() if v is not None},
                gpu_model=r["gpu_model"] or labels.get(self.cfg.gpu_product_label), gpu_count=int(r["gpu_count"]),
                gpu_memory_mib=float(r["gpu_memory_mib"]), gpu_replicas=int(r["gpu_replicas"]), mig=bool(r["is_mig"]),
                labels=labels,
                taints=tuple(Taint(t["key"], t.get("value"), t.get("effect") or "NoSchedule") for t in (r["taints"] or [])),
                unschedulable=bool(r["unschedulable"]), capacity_type=r["capacity_type"] or "on_demand",
                instance_type=r["instance_type"], provider=r["provider"], region=r["region"],
                hourly_price_usd=float(r["usd_per_hour"]),
            ))
            at[r["cluster"]] = _utc(r["snapshot_ts"])
            self._family[(r["cluster"], r["node"])] = r["gpu_family"]
        node_of = {(c, n.name): n for c, ns in nodes_by_cluster.items() for n in ns}
        pods_by_cluster: dict[str, list[PodPlacement]] = defaultdict(list)
        placed: dict[_Key, list[tuple[PodPlacement, NodeShape]]] = defaultdict(list)
        containers: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for r in self._q("select * from fct_pods_latest order by cluster, namespace, pod"):
            node = node_of.get((r["cluster"], r["node"]))
            if node is None:
                continue  # bound to a node missing from the latest node snapshot
            pod = PodPlacement(
                cluster=r["cluster"], namespace=r["namespace"], pod=r["pod"], node=r["node"],
                requests={k: float(v) for k, v in _map(r["requests"]).items() if v is not None},
                gpu_equiv=float(r["gpu_equiv"]), gpu_fraction=float(r["gpu_fraction"]), tier=r["tier"],
                owner_kind=r["owner_kind"], owner_name=r["owner_name"], node_selector=_map(r["node_selector"]),
                tolerations=tuple(Toleration(t.get("key") or None, t.get("operator") or "Equal", t.get("value"),
                                             t.get("effect") or None) for t in (r["tolerations"] or [])),
                do_not_disrupt=bool(r["do_not_disrupt"]), pdb=r["pdb"], checkpointed=bool(r["checkpointed"]),
                warmup_seconds=_f(r.get("warmup_seconds")),
            )
            pods_by_cluster[r["cluster"]].append(pod)
            placed[(r["cluster"], r["namespace"], r["workload"])].append((pod, node))
            containers[(r["cluster"], r["namespace"], r["pod"])] = r["container_resources"] or []
        snaps = [ClusterSnapshot(cluster=c, at=at[c], nodes=tuple(ns), pods=tuple(pods_by_cluster.get(c, ())))
                 for c, ns in sorted(nodes_by_cluster.items())]
        return snaps, placed, containers

    # -- GPU usage --------------------------------------------------------------------------------
    def _gpu_usage(self, start: datetime, end: datetime,
                   placed: dict[_Key, list[tuple[PodPlacement, NodeShape]]]) -> list[WorkloadGpuUsage]:
        hourly: dict[_Key, list[HourUsage]] = defaultdict(list)
        info: dict[_Key, dict[str, Any]] = {}
        for r in self._q("""
                select cluster, namespace, workload, hour, tier, workload_kind, gpu_model, gpu_resource,
                       gpu_equiv_per_pod, gpu_hours, gpu_cost_usd, total_cost_usd, samples, util_mean, util_p95,
                       fb_used_max_mib
                from fct_workload_gpu_hourly where hour >= ? and hour < ?
                order by cluster, namespace, workload, hour""", [start, end]):
            key = (r["cluster"], r["namespace"], r["workload"])
            measured = int(r["samples"]) > 0
            hourly[key].append(HourUsage(
                hour=_utc(r["hour"]), util_mean=_f(r["util_mean"]) if measured else None,
                util_p95=_f(r["util_p95"]) if measured else None, samples=int(r["samples"]),
                fb_used_max_mib=_f(r["fb_used_max_mib"]) if measured else None, gpu_hours=float(r["gpu_hours"]),
                gpu_cost_usd=float(r["gpu_cost_usd"] or 0.0), total_cost_usd=float(r["total_cost_usd"] or 0.0)))
            info[key] = r  # ordered by hour: the newest hour's tier, kind, model and resource
            info[key]["max_equiv"] = max(float(r["gpu_equiv_per_pod"] or 0.0),
                                         float(info.get(key, {}).get("max_equiv", 0.0) or 0.0))
        window = {(r["cluster"], r["namespace"], r["workload"]): r for r in self._q(
            "select * from gpu_workload_evidence_window(?, ?)", [start, end])}
        devices: dict[_Key, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in self._q("""select cluster, namespace, workload, pod, util_p95 from gpu_device_evidence_window(?, ?)
                            where util_p95 is not null order by cluster, namespace, workload, pod""", [start, end]):
            devices[(r["cluster"], r["namespace"], r["workload"])][r["pod"]].append(float(r["util_p95"]))
        prices = {(r["provider"], r["region"], r["instance_type"]): r
                  for r in self._q("select * from fct_instance_prices_latest")}
        requests = self._requests(start, end)
        out = []
        for key, hours in hourly.items():
            i = info[key]
            st = window.get(key, {})
            here = placed.get(key, [])
            node = here[0][1] if here else None
            whole = max((p.whole_gpus for p, n in here if n.device_level_gpus), default=0)
            # the per-device p95s of its pod with the most devices (ties: the first pod by name)
            devs = max(sorted(devices.get(key, {}).items()), key=lambda kv: len(kv[1]), default=(None, []))[1]
            price = prices.get((node.provider, node.region, node.instance_type), {}) if node else {}
            out.append(WorkloadGpuUsage(
                cluster=key[0], namespace=key[1], workload=key[2], tier=i["tier"] or "unknown",
                workload_kind=i["workload_kind"], gpu_model=i["gpu_model"] or (node.gpu_model if node else None),
                gpu_resource=i["gpu_resource"], hourly=tuple(hours),
                gpu_family=self._family.get((node.cluster, node.name)) if node else None,
                replicas=max(1, len(here)), gpus_per_pod=whole,
                gpu_equiv_per_pod=max((p.gpu_equiv for p, _ in here), default=float(i["max_equiv"])),
                device_p95=tuple(sorted(devs, reverse=True)),
                util_p95=_f(st.get("util_p95")), util_mean=_f(st.get("util_mean")),
                peak_fb_used_mib=_f(st.get("fb_used_max_mib")),
                device_memory_mib=_f(st.get("fb_total_mib")) or (node.gpu_memory_mib if node else None),
                checkpointed=any(p.checkpointed for p, _ in here),
                capacity_type=node.capacity_type if node else None, instance_type=node.instance_type if node else None,
                on_demand_usd_per_hour=_f(price.get("on_demand_usd_per_hour")),
                spot_usd_per_hour=_f(price.get("spot_usd_per_hour")),
                requests_hourly=requests.get(key),
                warmup_seconds=max((p.warmup_seconds for p, _ in here
                                    if p.warmup_seconds is not None and p.warmup_seconds >= 0), default=None),
            ))
        return out

    def _requests(self, start: datetime, end: datetime) -> dict[_Key, dict[datetime, float]]:
        """Requests per workload-hour (models summed) of the pods the counters matched; {} without the mart."""
        present = {r["table_name"] for r in self._q(
            "select table_name from information_schema.tables where table_name = 'fct_serving_requests_hourly'")}
        if not present:
            return {}
        out: dict[_Key, dict[datetime, float]] = defaultdict(dict)
        for r in self._q("""
                select cluster, namespace, workload, hour, sum(requests) as requests
                from fct_serving_requests_hourly where matched and hour >= ? and hour < ?
                group by all order by cluster, namespace, workload, hour""", [start, end]):
            out[(r["cluster"], r["namespace"], r["workload"])][_utc(r["hour"])] = float(r["requests"] or 0.0)
        return dict(out)

    # -- CPU / memory -----------------------------------------------------------------------------
    def _container_usage(self, start: datetime, end: datetime,
                         placed: dict[_Key, list[tuple[PodPlacement, NodeShape]]],
                         containers: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[ContainerUsage]:
        if not placed:
            return []
        ref = _utc(end).timestamp()
        hl = self.cfg.histogram_half_life_hours * 3600.0
        # CPU counts are decayed at the middle of their hour, memory peaks at its end (VPA keeps one
        # memory peak per interval).
        cpu_w = decay_sql("epoch(hour) + 1800", ref, hl)
        mem_w = decay_sql("epoch(hour) + 3600", ref, hl)
        keys = "cluster, namespace, workload, container"
        rows = self._q(f"""
            with h as (select * from fct_container_usage_hourly where hour >= ? and hour < ?),
            cpu as (select {keys}, e.b as b, sum(e.n * {cpu_w}) as w
                    from (select *, unnest(cpu_hist) as e from h) group by all),
            mem as (select {keys}, e.b as b, sum(e.n * {mem_w}) as w
                    from (select *, unnest(memory_hist) as e from h) group by all),
            stats as (select {keys}, sum(samples) as samples, min(first_ts) as first_ts, max(last_ts) as last_ts,
                             max(memory_peak_bytes) as peak from h group by all),
            cpu_l as (select {keys}, list(struct_pack(b := b, w := w)) as cpu_w from cpu group by all),
            mem_l as (select {keys}, list(struct_pack(b := b, w := w)) as mem_w from mem group by all)
            select s.*, c.cpu_w, m.mem_w
            from stats s
            left join cpu_l c using (cluster, namespace, workload, container)
            left join mem_l m using (cluster, namespace, workload, container)
            order by {keys}""", [start, end])
        rates = self._cpu_mem_rates(start, end)
        out = []
        for r in rows:
            key = (r["cluster"], r["namespace"], r["workload"])
            here = placed.get(key)
            if not here:
                continue  # gone by now: nothing to right-size
            first = here[0][0]
            spec = next((c for c in containers.get((first.cluster, first.namespace, first.pod), [])
                         if c.get("name") == r["container"]), {})
            cpu_rate, mem_rate = rates.get(key, (0.0, 0.0))
            out.append(ContainerUsage(
                cluster=key[0], namespace=key[1], workload=key[2], container=r["container"],
                tier=next((p.tier for p, _ in here if p.tier), None) or "unknown",
                cpu_request=_f(spec.get("cpu_request")), memory_request=_f(spec.get("memory_request")),
                memory_limit=_f(spec.get("memory_limit")),
                cpu_buckets={int(e["b"]): float(e["w"]) for e in (r["cpu_w"] or [])},
                memory_buckets={int(e["b"]): float(e["w"]) for e in (r["mem_w"] or [])},
                samples=int(r["samples"] or 0), first_sample=_utc(r["first_ts"]), last_sample=_utc(r["last_ts"]),
                memory_peak=float(r["peak"] or 0.0), cpu_cost_usd_per_core_hour=cpu_rate,
                memory_cost_usd_per_gib_hour=mem_rate, replicas=len(here)))
        return out

    def _cpu_mem_rates(self, start: datetime, end: datetime) -> dict[_Key, tuple[float, float]]:
        """$ per billed core-hour and GiB-hour of each workload over the last day: the mart's CPU /
        memory cost over max(request, usage) × covered hours."""
        since = max(start, end - timedelta(hours=24))
        rows = self._q("""
            select cluster, namespace, workload,
                   sum(cpu_cost_usd) / nullif(sum(greatest(cpu_request, coalesce(cpu_usage_cores, 0)) * covered_hours), 0) as cpu,
                   sum(memory_cost_usd) / nullif(sum(greatest(memory_request_gib, coalesce(memory_usage_gib, 0)) * covered_hours), 0) as mem
            from fct_gpu_allocation_hourly where hour >= ? and hour < ? group by all""", [since, end])
        return {(r["cluster"], r["namespace"], r["workload"]): (float(r["cpu"] or 0.0), float(r["mem"] or 0.0))
                for r in rows}


# ---------------------------------------------------------------------------------------------
# helpers


def _utc(ts: Any) -> datetime:
    """Marts hold naive UTC timestamps."""
    if isinstance(ts, datetime):
        return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    raise TypeError(f"not a timestamp: {ts!r}")


def _naive(ts: Any) -> datetime:
    return _utc(ts).replace(tzinfo=None)


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def _map(v: Any) -> dict[str, Any]:
    """Arrow maps come back as lists of (key, value) pairs."""
    if v is None:
        return {}
    if isinstance(v, dict):
        return dict(v)
    return {k: val for k, val in v}
