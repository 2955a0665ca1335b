"""A small cluster written as a lake and built by dbt (the change-loop and demo-cluster tests' world).

Scenario (cluster c1, pool "gpu" of two 8×A100-80GB p4de.24xlarge on-demand nodes at $40/h, spot $16/h,
10 hours of data, snapshots every 5 minutes, DCGM and container usage every minute):
- ``etl`` (batch Job in ``data``, 1 GPU on n1): 0 % busy, 8 CPU requested but 0.5 used -> reclaim + CPU right-size
- ``train`` (checkpointed PyTorchJob in ``ml``, 2 GPUs on n1): 90 % busy               -> move to spot
- ``api`` (serving Deployment in ``web``, 2 × 1 GPU on n2): 0 % busy                   -> never reclaimed
Namespaces carry the ``team`` label (TEAMS), so the warehouse attributes them. Every mart is dbt's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpufinops.settings import Settings
from ingest.lake import LakeWriter

T0 = datetime(2026, 11, 1, tzinfo=UTC)
HOURS = 10
SNAPSHOT_S = 300
GIB = 1024**3
TEAMS = {"data": "data-eng", "ml": "ml-research", "web": "web"}
PODS = {  # pod: (node, namespace, workload, owner kind, tier, gpus, util, cpu req, mem req, annotations)
    "etl-1": ("n1", "data", "etl", "Job", "batch", 1, 0.0, 8.0, 32 * GIB, {}),
    "train-0": ("n1", "ml", "train", "PyTorchJob", "training", 2, 0.9, 4.0, 16 * GIB,
                {"gpufinops.io/checkpointed": "true"}),
    "api-7d9f-x": ("n2", "web", "api", "Deployment", "serving", 1, 0.0, 2.0, 8 * GIB, {}),
    "api-7d9f-y": ("n2", "web", "api", "Deployment", "serving", 1, 0.0, 2.0, 8 * GIB, {}),
}


def _node_row(ts: datetime, name: str) -> dict:
    cap = {"cpu": 96.0, "memory": float(1024 * GIB), "nvidia.com/gpu": 8.0, "pods": 110.0}
    return dict(snapshot_ts=ts, node=name, uid=f"uid-{name}", provider="aws", provider_id=f"aws:///us-east-1a/i-{name}",
                instance_type="p4de.24xlarge", region="us-east-1", zone="us-east-1a", capacity_type="on_demand",
                node_pool="gpu", labels=[("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB")], annotations=[],
                taints=[], unschedulable=False, capacity=list(cap.items()), allocatable=list(cap.items()),
                gpu_product="NVIDIA-A100-SXM4-80GB", gpu_count=8, gpu_memory_mib=81920, gpu_replicas=1,
                mig_config=None, mig_strategy=None)


def _pod_row(ts: datetime, pod: str) -> dict:
    node, ns, wl, kind, tier, gpus, _u, cpu, mem, ann = PODS[pod]
    req = [("cpu", cpu), ("memory", float(mem))] + ([("nvidia.com/gpu", float(gpus))] if gpus else [])
    lim = [("memory", float(mem))] + ([("nvidia.com/gpu", float(gpus))] if gpus else [])
    return dict(snapshot_ts=ts, namespace=ns, pod=pod, uid=f"uid-{pod}", node=node, phase="Running",
                qos_class="Burstable", priority=0, priority_class=None, owner_kind=kind, owner_name=wl,
                labels=[("gpufinops.io/tier", tier)], annotations=list(ann.items()),
                containers=[{"name": "main", "requests": req, "limits": lim}],
                init_containers=[], start_time=T0, node_selector=[], tolerations=[])


def write_world_lake(lake_dir: Path) -> None:
    w = LakeWriter(lake_dir)
    end = T0 + timedelta(hours=HOURS)
    with w.run("test", "c1", T0, end) as r:
        snaps = [T0 + timedelta(seconds=s) for s in range(0, HOURS * 3600, SNAPSHOT_S)]
        r.add("k8s_nodes", [_node_row(ts, n) for ts in snaps for n in ("n1", "n2")])
        r.add("k8s_pods", [_pod_row(ts, p) for ts in snaps for p in PODS])
        r.add("k8s_namespaces", [dict(snapshot_ts=ts, namespace=ns, labels=[("team", team)], annotations=[])
                                 for ts in snaps for ns, team in TEAMS.items()])
        gpu, usage = [], []
        for m in range(HOURS * 60):
            ts = T0 + timedelta(minutes=m)
            for pod, (node, ns, _wl, _k, _t, gpus, util, _c, _m, _a) in PODS.items():
                for g in range(gpus):
                    gpu.append(dict(ts=ts, hostname=node, gpu=g, uuid=f"GPU-{node}-{pod}-{g}",
                                    model_name="NVIDIA A100-SXM4-80GB", namespace=ns, pod=pod, container="main",
                                    gr_engine_active=util, gpu_util=util * 100, fb_used_mib=4096.0,
                                    fb_free_mib=81920.0 - 4096.0, power_w=60.0, tensor_active=0.0))
                usage.append(dict(ts=ts, namespace=ns, pod=pod, container="main", cpu_cores=0.5,
                                  memory_working_set_bytes=float(2 * GIB)))
        r.add("gpu_samples", gpu)
        r.add("container_usage", usage)
    with w.run("test", "_global", T0 - timedelta(days=30), end) as r:
        r.add("prices", [dict(provider="aws", region="us-east-1", instance_type="p4de.24xlarge", capacity_type=ct,
                              usd_per_hour=usd, gpu_usd_per_hour=None, currency="USD",
                              effective_from=T0 - timedelta(days=1), effective_to=None, source="test")
                         for ct, usd in (("on_demand", 40.0), ("spot", 16.0))])


def build_world(home: Path) -> Settings:
    """The world's lake, then a full `dbt build` of the warehouse (the real models and tests)."""
    from transform import run_build

    home.mkdir(parents=True, exist_ok=True)
    config = home / "gpufinops.yaml"
    config.write_text(f"snapshot_interval_s: {SNAPSHOT_S}\n")
    settings = Settings(home=home, config=config)
    write_world_lake(settings.lake_dir)
    run_build(settings, full_refresh=True)
    return settings


def write_world_span(lake_dir: Path, start: datetime, end: datetime, pods: list[str], *,
                     counter: Callable[[str, datetime], float] | None = None, source: str = "test",
                     prices: bool = False) -> None:
    """The world's nodes and the given ``pods`` over [start, end) (snapshots every SNAPSHOT_S, DCGM and
    container usage every minute), and, with ``counter``, the serving pods' cumulative request counter
    (``counter(pod, ts)``) at every snapshot. For worlds of several days (the change-outcome test)."""
    w = LakeWriter(lake_dir)
    with w.run(source, "c1", start, end) as r:
        n = int((end - start).total_seconds())
        snaps = [start + timedelta(seconds=s) for s in range(0, n, SNAPSHOT_S)]
        r.add("k8s_nodes", [_node_row(ts, name) for ts in snaps for name in ("n1", "n2")])
        r.add("k8s_pods", [_pod_row(ts, p) for ts in snaps for p in pods])
        r.add("k8s_namespaces", [dict(snapshot_ts=ts, namespace=ns, labels=[("team", team)], annotations=[])
                                 for ts in snaps for ns, team in TEAMS.items()])
        gpu, usage = [], []
        for m in range(n // 60):
            ts = start + timedelta(minutes=m)
            for pod in pods:
                node, ns, _wl, _k, _t, gpus, util, _c, _m, _a = PODS[pod]
                for g in range(gpus):
                    gpu.append(dict(ts=ts, hostname=node, gpu=g, uuid=f"GPU-{node}-{pod}-{g}",
                                    model_name="NVIDIA A100-SXM4-80GB", namespace=ns, pod=pod, container="main",
                                    gr_engine_active=util, gpu_util=util * 100, fb_used_mib=4096.0,
                                    fb_free_mib=81920.0 - 4096.0, power_w=60.0, tensor_active=0.0))
                usage.append(dict(ts=ts, namespace=ns, pod=pod, container="main", cpu_cores=0.5,
                                  memory_working_set_bytes=float(2 * GIB)))
        r.add("gpu_samples", gpu)
        r.add("container_usage", usage)
        if counter is not None:
            r.add("serving_requests", [dict(ts=ts, namespace=PODS[p][1], pod=p, model="m", requests_total=counter(p, ts))
                                       for ts in snaps for p in pods if PODS[p][4] == "serving"])
    if prices:
        with w.run(source, "_global", T0 - timedelta(days=30), end) as r:
            r.add("prices", [dict(provider="aws", region="us-east-1", instance_type="p4de.24xlarge", capacity_type=ct,
                                  usd_per_hour=usd, gpu_usd_per_hour=None, currency="USD",
                                  effective_from=T0 - timedelta(days=1), effective_to=None, source="test")
                             for ct, usd in (("on_demand", 40.0), ("spot", 16.0))])
