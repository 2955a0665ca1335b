"""Orchestration: fleet -> pods -> schedule -> one lake run per (cluster, day), plus the price card."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from queue import Empty

import pyarrow as pa

from gpufinops.errors import InputError
from ingest.demo.catalog import GPU_MODELS, InstanceCatalog
from ingest.demo.fleet import Fleet, build_fleet
from ingest.demo.scheduler import ScheduleStats, schedule
from ingest.demo.serving import QpsSeries, ServingCounters
from ingest.demo.snapshots import ClusterSnapshots
from ingest.demo.telemetry import SERVING, ClusterTelemetry, GenAiSeries
from ingest.demo.workload import WorkloadOptions, make_pods
from ingest.lake import LakeWriter, list_runs
from ingest.price_card import default_price_card_path, write_price_card
from ingest.schema import TABLES

__all__ = ["DemoOptions", "DemoSummary", "DEMO_SOURCE", "DEMO_TABLES", "default_data_dir", "generate_demo", "plan_days"]

DEMO_SOURCE = "demo"
DEMO_TABLES = ("k8s_nodes", "k8s_pods", "k8s_namespaces", "gpu_samples", "container_usage", "serving_requests")
_CHUNK_S = 6 * 3600  # DCGM rows are generated a quarter-day at a time to bound memory


def default_data_dir() -> Path:
    """``<repo>/../shared/data``: where the project keeps the public traces."""
    return Path(__file__).resolve().parents[3] / "shared" / "data"


@dataclass
class DemoOptions:
    days: int = 14
    clusters: int = 2
    nodes: int = 150
    seed: int = 42
    start: date = date(2026, 11, 1)
    snapshot_interval_s: int = 60  # k8s snapshots
    dcgm_interval_s: int = 60
    gpus_per_node: int | None = None  # e.g. 8: every node an 8-GPU node (the bench fleet)
    target_allocation: float = 0.72
    # The bench's incremental step: the full run holds back the window's last N hours, and a
    # second run with ``tail_only`` lands just them (as a live ingest would, an hour later).
    hold_back_hours: int = 0
    tail_only: bool = False
    tail_hours: int | None = None  # with tail_only: land only the first N held-back hours (None: all)
    workers: int = 1  # processes; clusters are generated in parallel
    data_dir: Path = field(default_factory=default_data_dir)
    price_card: Path = field(default_factory=default_price_card_path)

    def check(self) -> None:
        if self.days < 1:
            raise InputError(f"--days must be ≥ 1, got {self.days}")
        if self.clusters < 1:
            raise InputError(f"--clusters must be ≥ 1, got {self.clusters}")
        if self.nodes < 4 * self.clusters:
            raise InputError(f"--nodes must be ≥ 4 per cluster ({4 * self.clusters}), got {self.nodes}")
        for name, v in (("--snapshot-interval", self.snapshot_interval_s), ("--dcgm-interval", self.dcgm_interval_s)):
            if v < 60 or v % 60 or 86400 % v:
                raise InputError(f"{name} must be a whole number of minutes dividing a day, got {v}s")
        if not 0 <= self.hold_back_hours < 24:
            raise InputError(f"--hold-back-hours must be in [0, 24), got {self.hold_back_hours}")
        if self.tail_only and not self.hold_back_hours:
            raise InputError("--tail-only needs --hold-back-hours N (the tail it lands)")
        if self.tail_hours is not None and not (self.tail_only and 1 <= self.tail_hours <= self.hold_back_hours):
            raise InputError(f"--tail-hours must be in [1, --hold-back-hours] with --tail-only, got {self.tail_hours}")
        if not 0.1 <= self.target_allocation <= 0.95:
            raise InputError(f"--target-allocation must be in [0.1, 0.95], got {self.target_allocation}")
        for f in ("openb/openb_node_list_gpu_node.csv", "openb/openb_pod_list_default.csv",
                  "genai/pod_gpu_duty_cycle_anon.csv.gz"):
            if not (self.data_dir / f).is_file():
                raise InputError(f"trace file {self.data_dir / f} is missing (set --data-dir / GPUFINOPS_DEMO_DATA_DIR)")

    @property
    def window(self) -> tuple[datetime, datetime]:
        s = datetime(self.start.year, self.start.month, self.start.day, tzinfo=UTC)
        return s, s + timedelta(days=self.days)


@dataclass
class DemoSummary:
    clusters: list[str]
    nodes: int
    gpus_by_model: dict[str, int]
    pods: int
    pending_gpu_pods: int
    rows: dict[str, int]
    seconds: float
    schedule: dict[str, ScheduleStats] = field(default_factory=dict)


def plan_days(opts: DemoOptions, fleet: Fleet) -> list[tuple[str, datetime, datetime]]:
    s, e = opts.window
    out: list[tuple[str, datetime, datetime]] = []
    for c in fleet.clusters:
        runs = [(c.name, s + timedelta(days=d), min(e, s + timedelta(days=d + 1))) for d in range(opts.days)]
        if opts.hold_back_hours:
            cut = e - timedelta(hours=opts.hold_back_hours)
            runs[-1] = (c.name, runs[-1][1], cut)
            tail = (c.name, cut, e if opts.tail_hours is None else cut + timedelta(hours=opts.tail_hours))
            if opts.tail_only:
                runs = [tail]
        out += runs
    return out


def _clear_stale(writer: LakeWriter, planned: set[tuple[str, str, str]]) -> None:
    """Empty the demo slices a previous run wrote that this one will not overwrite."""
    empty = {t: pa.table({f.name: pa.array([], f.type) for f in TABLES[t].schema}) for t in DEMO_TABLES}
    for rec in list_runs(writer.root):
        if rec.source != DEMO_SOURCE or rec.status != "committed" or not any(rec.rows.values()):
            continue
        key = (rec.cluster, rec.window_start, rec.window_end)
        if key in planned:
            continue
        with writer.run(DEMO_SOURCE, rec.cluster, datetime.fromisoformat(rec.window_start),
                        datetime.fromisoformat(rec.window_end)) as run:
            for t in DEMO_TABLES:
                run.add(t, empty[t])


@dataclass
class _ClusterResult:
    rows: Counter
    pods: int
    pending: int
    stats: ScheduleStats


def _generate_cluster(lake_dir: Path, opts: DemoOptions, fleet: Fleet, cluster: str, day_numbers: list[int],
                      on_step: Callable[[str], None] | None) -> _ClusterResult:
    """Pods and schedule of one cluster, then its runs for the given days (indices into the window).

    A cluster's pods and schedule depend only on the options and its index, so any process can
    rebuild them and write any of its days.
    """
    writer = LakeWriter(lake_dir)
    w0, w1 = opts.window
    ws, we = w0.timestamp(), w1.timestamp()
    genai = GenAiSeries.load(opts.data_dir / "genai")
    wopts = WorkloadOptions(ws, we, opts.seed, target_allocation=opts.target_allocation)
    nodes = fleet.of(cluster)
    pods = make_pods(fleet, cluster, opts.data_dir / "openb", wopts)
    layout, stats = schedule(nodes, pods, we)
    pending = sum(1 for p in pods if p.cls not in ("cpu", "system") and p.sched != p.created)
    tele = ClusterTelemetry(nodes, layout, pods, genai, opts.seed)
    counters = ServingCounters(pods, QpsSeries.load(opts.data_dir / "genai"), opts.seed, SERVING)
    snaps = ClusterSnapshots(nodes, pods, ws)
    rows: Counter[str] = Counter()
    mine = [d for d in plan_days(opts, fleet) if d[0] == cluster]
    for _, d0, d1 in (mine[i] for i in day_numbers):
        a, b = d0.timestamp(), d1.timestamp()
        with writer.run(DEMO_SOURCE, cluster, d0, d1) as run:
            rows["k8s_nodes"] += run.add("k8s_nodes", snaps.k8s_nodes(a, b, opts.snapshot_interval_s))
            rows["k8s_namespaces"] += run.add("k8s_namespaces", snaps.k8s_namespaces(a, b, opts.snapshot_interval_s))
            rows["k8s_pods"] += run.add("k8s_pods", snaps.k8s_pods(a, b, opts.snapshot_interval_s))
            t = a
            while t < b:
                u = min(b, t + _CHUNK_S)
                rows["gpu_samples"] += run.add("gpu_samples", tele.gpu_samples(t, u, opts.dcgm_interval_s))
                rows["container_usage"] += run.add("container_usage", tele.container_usage(t, u, opts.dcgm_interval_s))
                rows["serving_requests"] += run.add("serving_requests", counters.table(t, u, opts.dcgm_interval_s))
                t = u
        if on_step:
            on_step(f"{cluster} {d0.date()}")
    return _ClusterResult(rows, len(pods), pending, stats)


def _worker(lake_dir: Path, opts: DemoOptions, fleet: Fleet, cluster: str, day_numbers: list[int],
            queue) -> _ClusterResult:  # noqa: ANN001 - a multiprocessing proxy queue
    return _generate_cluster(lake_dir, opts, fleet, cluster, day_numbers, queue.put)


def _blocks(n_days: int, parts: int) -> list[list[int]]:
    """Contiguous day blocks; busy clusters are split so the workers finish together."""
    size = -(-n_days // parts)
    return [list(range(i, min(n_days, i + size))) for i in range(0, n_days, size)]


def generate_demo(
    lake_dir: Path,
    opts: DemoOptions,
    *,
    on_start: Callable[[int], None] | None = None,
    on_step: Callable[[str], None] | None = None,
) -> DemoSummary:
    """Write the demo fleet into the lake; re-running with the same options rewrites the same slices.

    Clusters are independent (each seeded by its index), so with ``opts.workers`` > 1 blocks of
    (cluster, days) are generated in separate processes; the rows do not depend on the number of
    workers.
    """
    t_start = time.perf_counter()
    opts.check()
    writer = LakeWriter(lake_dir)
    rows: Counter[str] = Counter()
    rows["prices"] += write_price_card(writer, opts.price_card)
    catalog = InstanceCatalog(opts.price_card)
    w0, w1 = opts.window
    fleet = build_fleet(
        openb_dir=opts.data_dir / "openb", catalog=catalog, clusters=opts.clusters, nodes=opts.nodes,
        window_start=w0.timestamp(), window_end=w1.timestamp(), seed=opts.seed, gpus_per_node=opts.gpus_per_node,
    )
    days = plan_days(opts, fleet)
    runs_per_cluster = len(days) // len(fleet.clusters)
    if not opts.tail_only:
        _clear_stale(writer, {(c, a.isoformat(), b.isoformat()) for c, a, b in days})
    if on_start:
        on_start(len(days))
    names = [c.name for c in fleet.clusters]
    workers = max(1, opts.workers)
    results: list[_ClusterResult] = []
    if workers == 1:
        results = [_generate_cluster(lake_dir, opts, fleet, c, list(range(runs_per_cluster)), on_step) for c in names]
        for r in results:
            rows.update(r.rows)
    else:
        # Each cluster is cut into `workers` day blocks (its pods and schedule are rebuilt per
        # block); the pool hands blocks out in order, so the heavier first cluster starts first.
        tasks = [(c, b) for c in names for b in _blocks(runs_per_cluster, workers)]
        ctx = mp.get_context("spawn")  # no fork of a process that holds Arrow's thread pools
        with ctx.Manager() as manager, ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            queue = manager.Queue()
            futures = [pool.submit(_worker, lake_dir, opts, fleet, c, b, queue) for c, b in tasks]
            done = 0
            while done < len(days):
                try:
                    label = queue.get(timeout=0.5)
                except Empty:
                    if any(f.done() and f.exception() for f in futures):
                        break
                    continue
                done += 1
                if on_step:
                    on_step(label)
            all_results = [f.result() for f in futures]
        for r in all_results:
            rows.update(r.rows)
        # pods and schedule are per cluster: take them from each cluster's first block
        results = [r for (_, b), r in zip(tasks, all_results, strict=True) if b[0] == 0]
    gpus: Counter[str] = Counter()
    for n in fleet.nodes:
        if n.gpu_count:
            gpus[GPU_MODELS[n.gpu_model].key] += n.gpu_count
    return DemoSummary(
        clusters=names, nodes=len(fleet.nodes), gpus_by_model=dict(gpus),
        pods=sum(r.pods for r in results), pending_gpu_pods=sum(r.pending for r in results),
        rows=dict(rows), seconds=time.perf_counter() - t_start,
        schedule={c: r.stats for c, r in zip(names, results, strict=True)},
    )
