"""Prometheus side of ``make bench``: DCGM ingest throughput, and the OpenCost question two ways.

(a) Ingest throughput: a real Prometheus holding back-filled DCGM samples (default 1,000 GPUs × 1
    day at 60 s, one field) is read by ``ingest_range`` into a lake; samples/s end to end.
(b) The OpenCost-style question — per-namespace allocated GPU-hours, utilised GPU-hours and idle %
    over 7 days — answered by PromQL over kube-state-metrics style request series plus DCGM, and by
    the warehouse: the same fleet landed through the real pipeline (nodes, pod snapshots every 60 s,
    namespaces and a price via the LakeWriter; DCGM through the Prometheus ingest), ``gpufinops
    build --full``, then ``fct_gpu_allocation_hourly``. Timings (cold, then best warm of 3), the build
    time and the largest relative difference per namespace and metric. An extra line answers it by
    raw DuckDB SQL over the Parquet (DCGM as landed, requests written beside it).

    The two agree exactly by construction of the windows, not by tuning: a pod is snapshotted at
    minutes [start, end), each snapshot covers [t_k, t_k+1), so it holds ``gpus × (end − start)``
    GPU-minutes; its request series has a sample at the same minutes and the PromQL range
    (at − 7d, at] with ``at = end − 60 s + 1 ms`` holds exactly the minutes [T0, end).

Sizes come from ``main()``'s arguments or ``BENCH_PROM_*`` environment variables. Back-filling is
the slow part here (promtool, per DESIGN §8); it is reported as its own stage. Nothing asserts a time.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bench._fleet_lake import land_fleet
from gpufinops.settings import Settings
from gpufinops.warehouse import connect
from ingest.lake import partition_files
from ingest.prometheus import PromClient, SplitLimits, ingest_range
from ingest.prometheus.queries import LOADERS
from testsupport.prometheus_server import Family, LocalPrometheus, backfill, write_openmetrics_blocks

__all__ = ["main", "Figures"]

OUT = Path(__file__).resolve().parent / "out"
STEP = 60
T0 = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday, long before "now": back-filled blocks must be old
NAMESPACES = ["llm-train", "llm-serve", "vision", "recsys", "research", "notebooks", "batch", "speech"]
SLOT_LAYOUTS = [[8], [4, 4], [4, 2, 1, 1], [2, 2, 2, 2], [1] * 8, [2, 1, 1, 4]]


@dataclass
class Figures:
    stages: list[dict[str, object]] = field(default_factory=list)
    answers: list[dict[str, object]] = field(default_factory=list)

    def stage(self, name: str, wall_s: float, samples: int | None = None, detail: str = "") -> None:
        rate = round(samples / wall_s) if samples and wall_s > 0 else None
        self.stages.append({"stage": name, "wall_s": round(wall_s, 3), "samples": samples, "samples_per_s": rate, "detail": detail})
        print(f"  {name}: {wall_s:.2f} s" + (f", {samples:,} samples, {rate:,}/s" if rate else "") + (f" ({detail})" if detail else ""),
              flush=True)


# -- synthetic fleet --------------------------------------------------------------------------------
@dataclass
class _Pod:
    namespace: str
    name: str
    node: str
    gpus: list[int]
    start: int  # minute index, inclusive
    end: int  # minute index, exclusive
    util: float


def _schedule(gpus: int, minutes: int, seed: int) -> list[_Pod]:
    """Pods on ``gpus / 8`` nodes: each GPU slot runs a sequence of pods (4–36 h) with idle gaps (0–6 h)."""
    rng = random.Random(seed)
    pods: list[_Pod] = []
    for n in range(gpus // 8):
        node = f"gpu-node-{n:04d}"
        first = 0
        for size in rng.choice(SLOT_LAYOUTS):
            devices = list(range(first, first + size))
            first += size
            t = rng.randrange(0, 6 * 60)
            while t < minutes:
                life = rng.randrange(4 * 60, 36 * 60)
                ns = rng.choice(NAMESPACES)
                pods.append(_Pod(ns, f"{ns}-{len(pods):06d}", node, devices, t, min(t + life, minutes),
                                 rng.choice([0.03, 0.1, 0.35, 0.6, 0.85, 0.95])))
                t += life + rng.randrange(0, 6 * 60)
    return pods


def _util(pod: _Pod, gpu: int, k: int) -> float:
    # Deterministic, bounded jitter around the pod's level (no RNG per sample: generation stays fast).
    return round(min(1.0, max(0.0, pod.util + ((k * 7919 + gpu * 104729) % 200 - 100) / 1000)), 3)


def _dcgm_family(pods: list[_Pod], gpus: int, minutes: int, t0: float) -> Family:
    def samples() -> Iterator[tuple[dict[str, str], float, float]]:
        by_gpu: dict[tuple[str, int], list[_Pod]] = {}
        for p in pods:
            for g in p.gpus:
                by_gpu.setdefault((p.node, g), []).append(p)
        for n in range(gpus // 8):
            node = f"gpu-node-{n:04d}"
            for g in range(8):
                base = {"hostname": node, "gpu": str(g), "UUID": f"GPU-{n:04d}-{g}", "modelName": "NVIDIA H100 80GB HBM3"}
                idle_labels = dict(base)
                timeline: list[_Pod | None] = [*sorted(by_gpu.get((node, g), []), key=lambda p: p.start), None]
                k = 0
                for pod in timeline:
                    stop = pod.start if pod is not None else minutes
                    for kk in range(k, stop):  # unallocated: the GPU idles, no pod labels
                        yield idle_labels, t0 + STEP * kk, 0.0
                    if pod is None:
                        break
                    labels = {**base, "namespace": pod.namespace, "pod": pod.name, "container": "main"}
                    for kk in range(pod.start, pod.end):
                        yield labels, t0 + STEP * kk, _util(pod, g, kk)
                    k = pod.end
    return Family("DCGM_FI_PROF_GR_ENGINE_ACTIVE", samples())


def _requests_family(pods: list[_Pod], t0: float) -> Family:
    def samples() -> Iterator[tuple[dict[str, str], float, float]]:
        for p in sorted(pods, key=lambda p: (p.node, p.name)):
            labels = {"namespace": p.namespace, "pod": p.name, "container": "main", "node": p.node,
                      "resource": "nvidia_com_gpu", "unit": "integer"}
            for k in range(p.start, p.end):
                yield labels, t0 + STEP * k, float(len(p.gpus))
    return Family("kube_pod_container_resource_requests", samples())


def _simple_dcgm(gpus: int, minutes: int, t0: float, fields: list[str]) -> Iterator[Family]:
    """(a): every GPU held by one pod all day; one series per GPU and field."""
    for metric in fields:
        def samples(metric: str = metric) -> Iterator[tuple[dict[str, str], float, float]]:
            for i in range(gpus):
                labels = {"hostname": f"gpu-node-{i // 8:04d}", "gpu": str(i % 8), "UUID": f"GPU-{i:05d}",
                          "modelName": "NVIDIA H100 80GB HBM3", "namespace": NAMESPACES[i % len(NAMESPACES)],
                          "pod": f"pod-{i // 8:04d}", "container": "main"}
                for k in range(minutes):
                    yield labels, t0 + STEP * k, ((k * 31 + i * 17) % 1000) / 1000
        yield Family(metric, samples())


# -- (a) ingest throughput ------------------------------------------------------------------------
def bench_ingest(work: Path, figs: Figures, gpus: int, hours: int, fields: int) -> None:
    minutes = hours * 60
    metrics = [LOADERS[n].metric for n in ("gr_engine_active", "fb_used", "gpu_util", "power", "fb_free", "tensor_active")][:fields]
    t = time.perf_counter()
    files, n = write_openmetrics_blocks(work / "a-om", _simple_dcgm(gpus, minutes, T0.timestamp(), metrics))
    figs.stage("a: write OpenMetrics", time.perf_counter() - t, n, f"{gpus} GPUs × {hours} h × {fields} field(s)")
    t = time.perf_counter()
    backfill(files, work / "a-tsdb")
    figs.stage("a: promtool back-fill", time.perf_counter() - t, n, f"{len(files)} block files, {os.cpu_count()} in parallel")
    with LocalPrometheus(work / "a-tsdb", extra_args=_NO_COMPACTION) as prom, PromClient(prom.url, timeout_s=300) as client:
        loaders = [LOADERS[k]() for k in LOADERS if LOADERS[k].metric in metrics]
        # Warm-up on one minute into a scratch lake: the one-off imports of the quality gate
        # (polars, pandas; ~3 s here) are not ingest throughput.
        ingest_range(client, work / "warmup-lake", "dcgm", "bench", T0, T0 + timedelta(minutes=1), loaders=loaders)
        with _Cpu(prom) as cpu:
            s = ingest_range(client, work / "a-lake", "dcgm", "bench", T0, T0 + timedelta(hours=hours), loaders=loaders,
                             limits=SplitLimits())
    figs.stage("a: DCGM ingest from Prometheus", cpu.wall, s.counts.samples,
               f"{s.requests} requests, {s.windows} window(s), {s.counts.rows:,} rows landed; {cpu}")


# -- (b) the OpenCost question --------------------------------------------------------------------
_PROMQL_ALLOC = 'sum by (namespace) (sum_over_time(kube_pod_container_resource_requests{resource="nvidia_com_gpu"}[{w}])) / 60'
_PROMQL_USED = 'sum by (namespace) (sum_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace!=""}[{w}])) / 60'
_SQL = """
with alloc as (
    select namespace, sum(gpus) / 60.0 as allocated_gpu_hours
    from read_parquet($requests) where ts >= $start and ts < $end group by namespace
), used as (
    select namespace, sum(gr_engine_active) / 60.0 as utilized_gpu_hours
    from read_parquet($gpu, hive_partitioning = false)
    where namespace is not null and ts >= $start and ts < $end group by namespace
), final as (
    select alloc.namespace, allocated_gpu_hours, coalesce(utilized_gpu_hours, 0) as utilized_gpu_hours,
           1 - coalesce(utilized_gpu_hours, 0) / allocated_gpu_hours as idle_pct
    from alloc left join used using (namespace)
)
select * from final order by namespace
"""
# Back-filled blocks stay as they are: compaction running behind the timed queries would skew them.
_NO_COMPACTION = ["--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h"]


class _Cpu:
    """Wall, this process's CPU and the Prometheus server's CPU over a block: on a shared machine the
    CPU seconds say more than the wall clock."""

    def __init__(self, prom: LocalPrometheus):
        self.prom = prom
        self.wall = self.client = self.server = 0.0

    def __enter__(self) -> _Cpu:
        self._t, self._c, self._s = time.perf_counter(), time.process_time(), self.prom.cpu_seconds() or 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t
        self.client = time.process_time() - self._c
        self.server = (self.prom.cpu_seconds() or 0.0) - self._s

    def __str__(self) -> str:
        return f"client CPU {self.client:.1f} s, server CPU {self.server:.1f} s"


def _timed(fn, repeat: int = 3) -> tuple[float, float, object]:  # type: ignore[no-untyped-def]
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return times[0], min(times[1:]), result


def bench_opencost(work: Path, figs: Figures, gpus: int, days: int) -> None:
    minutes = days * 1440
    pods = _schedule(gpus, minutes, seed=7)
    t = time.perf_counter()
    files, n = write_openmetrics_blocks(work / "b-om", [_dcgm_family(pods, gpus, minutes, T0.timestamp()),
                                                       _requests_family(pods, T0.timestamp())])
    figs.stage("b: write OpenMetrics", time.perf_counter() - t, n, f"{gpus} GPUs × {days} d, {len(pods)} pods")
    t = time.perf_counter()
    backfill(files, work / "b-tsdb")
    figs.stage("b: promtool back-fill", time.perf_counter() - t, n, f"{len(files)} block files")
    end = T0 + timedelta(days=days)
    # The warehouse side: the same fleet landed as a collector would (nodes, pod snapshots,
    # namespaces, a price: one lake run per day), DCGM through the real ingest from Prometheus.
    home = work / "b-home"
    lake = home / "lake"
    t = time.perf_counter()
    landed = land_fleet(lake, pods, gpus, minutes, T0, step_s=STEP, cluster=_CLUSTER)
    figs.stage("b: land k8s snapshots (LakeWriter)", time.perf_counter() - t, sum(landed.values()),
               ", ".join(f"{k} {v:,}" for k, v in landed.items()))
    req_path = _write_requests(work, pods)  # for the raw-SQL line only
    with LocalPrometheus(work / "b-tsdb", extra_args=_NO_COMPACTION) as prom, PromClient(prom.url, timeout_s=600) as client:
        with _Cpu(prom) as cpu:
            s = ingest_range(client, lake, "dcgm", _CLUSTER, T0, end, loaders=[LOADERS["gr_engine_active"]()])
        figs.stage("b: DCGM ingest from Prometheus", cpu.wall, s.counts.samples, f"{s.requests} requests; {cpu}")
        w = f"{days}d"
        at = end - timedelta(seconds=STEP)  # range (at - 7d, at] holds exactly the minutes [T0, end)
        at = at + timedelta(milliseconds=1)

        def promql() -> dict[str, tuple[float, float]]:
            alloc = {r["metric"].get("namespace", ""): float(r["value"][1]) for r in client.query(_PROMQL_ALLOC.replace("{w}", w), at)}
            used = {r["metric"].get("namespace", ""): float(r["value"][1]) for r in client.query(_PROMQL_USED.replace("{w}", w), at)}
            return {ns: (a, used.get(ns, 0.0)) for ns, a in alloc.items()}

        with _Cpu(prom) as p_cpu:
            p_cold, p_warm, p_ans = _timed(promql)
    scanned = n  # PromQL reads every request and DCGM sample of the 7 days
    figs.stage("b: PromQL 7-day per-namespace GPU-hours (warm)", p_warm, scanned,
               f"cold {p_cold:.3f} s; 3 runs: server CPU {p_cpu.server:.2f} s")

    t = time.perf_counter()
    build = subprocess.run([sys.executable, "-m", "cli.main", "--home", str(home), "build", "--full", "--no-summary"],
                           cwd=_REPO, capture_output=True, text=True)
    if build.returncode != 0:
        raise RuntimeError(f"warehouse build failed (rc {build.returncode}):\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}")
    rows_in = s.counts.rows + landed["k8s_pods"] + landed["k8s_nodes"]
    figs.stage("b: warehouse build (gpufinops build --full)", time.perf_counter() - t, rows_in,
               "input rows: DCGM + pod + node snapshots; " + " ".join(build.stdout.split())[:200])
    w_cold, w_warm, w_rows, w_ans = _warehouse_answer(Settings(home=home).warehouse_path, T0, end)
    figs.stage("b: warehouse fct_gpu_allocation_hourly, same question (warm)", w_warm, w_rows,
               f"warm {1000 * w_warm:.1f} ms (best of 3), cold {1000 * w_cold:.1f} ms (open + first query); "
               f"{w_rows:,} mart rows")

    gpu_files = [str(f) for f in partition_files(lake, "gpu_samples", cluster=_CLUSTER)]
    con = duckdb.connect()

    def sql() -> dict[str, tuple[float, float]]:
        rows = con.execute(_SQL, {"requests": str(req_path), "gpu": gpu_files, "start": T0, "end": end}).fetchall()
        return {ns: (a, u) for ns, a, u, _ in rows}

    c0 = time.process_time()
    d_cold, d_warm, d_ans = _timed(sql)
    d_cpu = time.process_time() - c0
    figs.stage("b: raw DuckDB SQL over Parquet, same question (warm)", d_warm, s.counts.samples + landed["k8s_pods"],
               f"cold {d_cold:.3f} s; 3 runs: CPU {d_cpu:.2f} s")
    assert isinstance(p_ans, dict) and isinstance(d_ans, dict)
    worst, where, utilised = _compare(figs, p_ans, w_ans, d_ans)
    figs.stages.append({"stage": "b: largest relative difference PromQL vs warehouse", "value": worst, "where": where})
    # Where they differ: the mart's sharing rule (int_pod_utilization_hourly) divides a device's
    # busy time by the GPU-equivalents of every pod with a series on it in the hour, so pods that
    # hold a GPU one after the other within an hour are read as sharing it. Recompute that effect
    # from the raw samples; what remains after it must be ~0.
    handover = {ns: (h, c) for ns, h, c in con.execute(_HANDOVER_SQL, {"gpu": gpu_files, "start": T0, "end": end}).fetchall()}
    residual, cells = 0.0, 0
    for a in figs.answers:
        h = handover.get(a["namespace"], (0.0, 0))
        a["handover_utilized_deficit_gpu_h"] = round(h[0], 3)
        cells += h[1]
        p_u, w_u = utilised[str(a["namespace"])]
        w_u += h[0]
        residual = max(residual, abs(p_u - w_u) / max(abs(p_u), abs(w_u), 1e-12))
    figs.stages.append({"stage": "b: utilised PromQL vs warehouse after the same-hour handover effect", "value": residual,
                        "where": f"{cells} pod-device-hours with a handover"})
    raw = max((abs(x - y) / max(abs(x), abs(y), 1e-12) for ns in set(p_ans) | set(d_ans)
               for x, y in zip(_metrics(p_ans.get(ns)), _metrics(d_ans.get(ns)), strict=True)), default=0.0)
    figs.stages.append({"stage": "b: largest relative difference PromQL vs raw SQL", "value": raw})
    print(f"  b: largest relative difference PromQL vs warehouse: {worst:.2e} ({where}); vs raw SQL: {raw:.2e}; "
          f"utilised after the handover effect ({cells} pod-device-hours): {residual:.2e}", flush=True)


_CLUSTER = "bench"
_REPO = Path(__file__).resolve().parents[1]
_WAREHOUSE_SQL = """
select namespace, sum(gpu_hours) as gpu_hours, sum(utilized_gpu_hours) as utilized_gpu_hours,
       sum(idle_gpu_hours) / nullif(sum(measured_gpu_hours), 0) as idle_fraction
from fct_gpu_allocation_hourly
where hour >= $start and hour < $end and gpu_hours > 0
group by namespace
order by namespace
"""

# Per (device, hour, pod) from the landed DCGM samples: k = pods with samples on the device in that
# hour. The mart gives each such pod-device u / k, so it books Σ m·u·(1 − 1/k) / 60 GPU-hours less
# than the samples hold (exactly what pods that follow one another on a GPU within an hour lose).
_HANDOVER_SQL = """
with cells as (
    select epoch_us(ts) // 3600000000 as hour, hostname, coalesce(uuid, cast(gpu as varchar)) as device,
           namespace, pod, count(*) as m, avg(gr_engine_active) as u
    from read_parquet($gpu, hive_partitioning = false)
    where namespace is not null and ts >= $start and ts < $end
    group by all
), shared as (
    select *, count(*) over (partition by hostname, device, hour) as k from cells
)
select namespace, sum(m * u * (1 - 1.0 / k)) / 60.0, count(*) filter (where k > 1) from shared group by namespace
"""


def _warehouse_answer(path: Path, start: datetime, end: datetime) -> tuple[float, float, int, dict[str, tuple[float, float, float]]]:
    """The question from the mart: cold = open the warehouse + first query (the file was just
    written, so the OS cache is warm); warm = best of 3 more; and the mart rows it reads."""
    params = {"start": start.replace(tzinfo=None), "end": end.replace(tzinfo=None)}  # mart hours are naive UTC
    t = time.perf_counter()
    con = connect(path)
    try:
        rows = con.execute(_WAREHOUSE_SQL, params).fetchall()
        cold = time.perf_counter() - t
        warm = []
        for _ in range(3):
            t = time.perf_counter()
            rows = con.execute(_WAREHOUSE_SQL, params).fetchall()
            warm.append(time.perf_counter() - t)
        n = con.execute("select count(*) from fct_gpu_allocation_hourly where hour >= $start and hour < $end", params).fetchone()
    finally:
        con.close()
    return cold, min(warm), int(n[0]) if n else 0, {ns: (a, u, idle if idle is not None else float("nan")) for ns, a, u, idle in rows}


def _metrics(ans: tuple[float, ...] | None) -> tuple[float, float, float]:
    """(allocated, utilised, idle fraction) from a (allocated, utilised[, idle]) answer."""
    a, u = (ans or (0.0, 0.0))[:2]
    idle = ans[2] if ans is not None and len(ans) > 2 else (1 - u / a if a else 0.0)
    return a, u, idle


def _compare(figs: Figures, p_ans: dict, w_ans: dict, d_ans: dict) -> tuple[float, str, dict[str, tuple[float, float]]]:  # type: ignore[type-arg]
    """Append the per-namespace answers; the largest relative difference PromQL vs warehouse, where
    it is, and the exact utilised GPU-hours (PromQL, warehouse) per namespace."""
    worst, where, utilised = 0.0, "", {}
    for ns in sorted(set(p_ans) | set(w_ans)):
        p, w, d = _metrics(p_ans.get(ns)), _metrics(w_ans.get(ns)), _metrics(d_ans.get(ns))
        for name, x, y in zip(("allocated", "utilized", "idle_pct"), p, w, strict=True):
            diff = abs(x - y) / max(abs(x), abs(y), 1e-12) if x == x and y == y else float("inf")
            if diff > worst or not where:
                worst, where = diff, f"{ns} {name}"
        figs.answers.append({"namespace": ns,
                             "promql_allocated_gpu_h": round(p[0], 3), "warehouse_allocated_gpu_h": round(w[0], 3),
                             "sql_allocated_gpu_h": round(d[0], 3),
                             "promql_utilized_gpu_h": round(p[1], 3), "warehouse_utilized_gpu_h": round(w[1], 3),
                             "sql_utilized_gpu_h": round(d[1], 3),
                             "promql_idle_pct": round(100 * p[2], 3), "warehouse_idle_pct": round(100 * w[2], 3),
                             "sql_idle_pct": round(100 * d[2], 3)})
        utilised[ns] = (p[1], w[1])
    return worst, where, utilised


def _write_requests(work: Path, pods: list[_Pod]) -> Path:
    """The GPU request of every pod per minute as plain Parquet, for the raw-SQL comparison line."""
    req_rows: dict[str, list[object]] = {"ts": [], "namespace": [], "pod": [], "gpus": []}
    for p in pods:
        for k in range(p.start, p.end):
            req_rows["ts"].append(T0 + timedelta(seconds=STEP * k))
            req_rows["namespace"].append(p.namespace)
            req_rows["pod"].append(p.name)
            req_rows["gpus"].append(float(len(p.gpus)))
    path = work / "requests.parquet"
    pq.write_table(pa.table(req_rows, schema=pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("namespace", pa.string()),
                                                       ("pod", pa.string()), ("gpus", pa.float64())])), path)
    return path


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def main(*, gpus_a: int | None = None, hours_a: int | None = None, fields_a: int | None = None,
         gpus_b: int | None = None, days_b: int | None = None, parts: str | None = None, out: Path = OUT) -> Figures:
    """Run (a) and (b) (``parts``/``BENCH_PROM_PARTS``: "ab", "a" or "b"); write
    ``out/promql_vs_warehouse.{json,md}`` and return the figures."""
    parts = parts or os.environ.get("BENCH_PROM_PARTS", "ab")
    gpus_a = gpus_a or _env_int("BENCH_PROM_GPUS_A", 1000)
    hours_a = hours_a or _env_int("BENCH_PROM_HOURS_A", 24)
    fields_a = fields_a or _env_int("BENCH_PROM_FIELDS_A", 1)
    gpus_b = gpus_b or _env_int("BENCH_PROM_GPUS_B", 200)
    days_b = days_b or _env_int("BENCH_PROM_DAYS_B", 7)
    figs = Figures()
    work = Path(tempfile.mkdtemp(prefix="gpufinops-prombench-"))
    try:
        if "a" in parts:
            print(f"(a) DCGM ingest throughput: {gpus_a} GPUs × {hours_a} h × {fields_a} field(s) at {STEP} s", flush=True)
            bench_ingest(work, figs, gpus_a, hours_a, fields_a)
        if "b" in parts:
            print(f"(b) OpenCost question: {gpus_b} GPUs × {days_b} d", flush=True)
            bench_opencost(work, figs, gpus_b, days_b)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "promql_vs_warehouse.json").write_text(json.dumps(asdict(figs), indent=2, default=str))
    lines = ["| stage | wall (s) | samples | samples/s | detail |", "|---|---:|---:|---:|---|"]
    for s in figs.stages:
        if "value" in s:
            lines.append(f"| {s['stage']} | | | | {s['value']:.2e}{' (' + str(s['where']) + ')' if s.get('where') else ''} |")
        else:
            lines.append(f"| {s['stage']} | {s['wall_s']} | {s['samples'] or ''} | {s['samples_per_s'] or ''} | {s['detail']} |")
    (out / "promql_vs_warehouse.md").write_text("\n".join(lines) + "\n")
    return figs


if __name__ == "__main__":
    sizes = dict(arg.split("=", 1) for arg in sys.argv[1:])  # e.g. gpus_a=200 days_b=1 parts=b
    main(**{k: v if k == "parts" else int(v) for k, v in sizes.items()})  # type: ignore[arg-type]
