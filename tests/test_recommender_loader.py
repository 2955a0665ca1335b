"""Loader, engine and CLI against a small warehouse + lake made here (contract columns only).

Scenario (cluster c1, pool "gpu" of two 8×A100-80GB on-demand nodes at $32/h, 10 hours of data):
- ``etl`` (batch Job, 1 GPU on n1): 0% busy, 8 CPU requested but 0.5 used  -> reclaim + CPU right-size
- ``train`` (checkpointed PyTorchJob, 2 GPUs on n1): 90% busy             -> move to spot
- ``api`` (serving Deployment, 2 × 1 GPU on n2): 0% busy                   -> fewer min replicas, never reclaim
- consolidation: n1's pods fit on n2; the serving pod does not move         -> free n1
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
import typer
from typer.testing import CliRunner

from cli.commands import recommend as recommend_cmd
from gpufinops.errors import ConfigError
from gpufinops.settings import Settings
from ingest.lake import LakeWriter
from recommender.engine import plan, run
from recommender.loader import load_input
from recommender.model import stable_id
from recommender.store import RecommendationStore

T0 = datetime(2026, 11, 1, tzinfo=UTC)
HOURS = 10
GIB = 1024**3
NODE_PRICE = 32.0
GPU_RATE = 3.5  # $ per GPU-hour in the mart
CPU_RATE, GIB_RATE = 0.05, 0.005
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
    node, ns, wl, kind, _tier, gpus, _u, cpu, mem, ann = PODS[pod]
    req = [("cpu", cpu), ("memory", float(mem))] + ([("nvidia.com/gpu", float(gpus))] if gpus else [])
    lim = [("memory", float(mem))] + ([("nvidia.com/gpu", float(gpus))] if gpus else [])
    return dict(snapshot_ts=ts, namespace=ns, pod=pod, uid=f"uid-{pod}", node=node, phase="Running",
                qos_class="Burstable", priority=0, priority_class=None, owner_kind=kind, owner_name=wl, labels=[],
                annotations=list(ann.items()), containers=[{"name": "main", "requests": req, "limits": lim}],
                init_containers=[], start_time=T0, node_selector=[], tolerations=[])


def build_world(home: Path) -> Settings:
    settings = Settings(home=home)
    w = LakeWriter(settings.lake_dir)
    end = T0 + timedelta(hours=HOURS)
    with w.run("test", "c1", T0, end) as r:
        snaps = [T0, T0 + timedelta(hours=HOURS - 1)]
        r.add("k8s_nodes", [_node_row(ts, n) for ts in snaps for n in ("n1", "n2")])
        r.add("k8s_pods", [_pod_row(ts, p) for ts in snaps for p in PODS])
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
    con = duckdb.connect(str(settings.warehouse_path))
    alloc, nodes = [], []
    for h in range(HOURS):
        hour = T0 + timedelta(hours=h)
        for pod, (node, ns, wl, kind, tier, gpus, util, cpu, mem, _a) in PODS.items():
            gc = gpus * GPU_RATE
            cc, mc = cpu * CPU_RATE, mem / GIB * GIB_RATE
            alloc.append((hour, "c1", node, ns, "team", "tenant", tier, kind, wl, pod, "NVIDIA-A100-SXM4-80GB",
                          "nvidia.com/gpu", float(gpus), gpus * util, gpus * (1 - util), float(gpus), gc, gc * (1 - util),
                          cc, mc, gc + cc + mc))
        for n in ("n1", "n2"):
            nodes.append((hour, "c1", n, "gpu", "p4de.24xlarge", "on_demand", "NVIDIA-A100-SXM4-80GB", 8, NODE_PRICE,
                          28.0, 3.0, 5.0, 17.5, 0.0, 1.8))
    con.execute("""create table fct_gpu_allocation_hourly (hour timestamptz, cluster varchar, node varchar,
        namespace varchar, team varchar, tenant varchar, tier varchar, workload_kind varchar, workload varchar,
        pod varchar, gpu_model varchar, gpu_resource varchar, gpu_hours double, utilized_gpu_hours double,
        idle_gpu_hours double, measured_gpu_hours double, gpu_cost_usd double, idle_cost_usd double,
        cpu_cost_usd double, memory_cost_usd double, total_cost_usd double)""")
    con.executemany("insert into fct_gpu_allocation_hourly values (" + ",".join(["?"] * 21) + ")", alloc)
    con.execute("""create table fct_node_hourly (hour timestamptz, cluster varchar, node varchar, node_pool varchar,
        instance_type varchar, capacity_type varchar, gpu_model varchar, gpu_capacity integer, node_cost_usd double,
        gpu_cost_usd double, allocated_gpu_hours double, unallocated_gpu_hours double, unallocated_cost_usd double,
        overcommit_cost_usd double, utilized_gpu_hours double)""")
    con.executemany("insert into fct_node_hourly values (" + ",".join(["?"] * 15) + ")", nodes)
    con.close()
    return settings


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build_world(tmp_path_factory.mktemp("rec_world"))


def test_loader_reads_contract_tables(world: Settings) -> None:
    data = load_input(world, now=T0 + timedelta(hours=HOURS))
    assert data.window_end == T0 + timedelta(hours=HOURS)
    by_wl = {w.workload: w for w in data.gpu_usage}
    assert set(by_wl) == {"etl", "train", "api"}
    etl = by_wl["etl"]
    assert etl.tier == "batch" and len(etl.hourly) == HOURS and etl.hourly[0].samples == 60
    assert etl.util_p95 == pytest.approx(0.0) and etl.peak_fb_used_mib == 4096.0 and etl.device_memory_mib == 81920.0
    assert etl.hourly[-1].gpu_cost_usd == pytest.approx(GPU_RATE)
    train = by_wl["train"]
    assert train.gpus_per_pod == 2 and train.device_p95 == pytest.approx((0.9, 0.9)) and train.checkpointed
    assert (train.on_demand_usd_per_hour, train.spot_usd_per_hour) == (40.0, 16.0)
    [snap] = data.snapshots
    assert {n.name: n.hourly_price_usd for n in snap.nodes} == {"n1": NODE_PRICE, "n2": NODE_PRICE}
    pods = {p.pod: p for p in snap.pods}
    assert pods["train-0"].requests["nvidia.com/gpu"] == 2.0 and pods["api-7d9f-x"].tier == "serving"
    [c] = [c for c in data.container_usage if c.workload == "etl"]
    assert c.cpu_request == 8.0 and c.samples == HOURS * 60
    assert c.cpu_cost_usd_per_core_hour == pytest.approx(CPU_RATE)
    assert c.memory_cost_usd_per_gib_hour == pytest.approx(GIB_RATE)


def test_every_kind_the_data_supports_with_savings(world: Settings) -> None:
    data = load_input(world, now=T0 + timedelta(hours=HOURS))
    recs = plan(data)
    kinds = {(r.kind, r.workload) for r in recs}
    assert ("reclaim_idle_gpu", "etl") in kinds
    assert ("scale_to_zero_window", "api") in kinds
    assert ("reclaim_idle_gpu", "api") not in kinds  # serving is never preempted
    api = by_wl_rec = {(r.kind, r.workload): r for r in recs}[("scale_to_zero_window", "api")]
    assert api.proposed == {"action": "set_min_replicas", "min_replicas": 1}
    assert api.est_monthly_savings_usd == pytest.approx(2 * GPU_RATE * 730 / 2)  # one of two replicas
    del by_wl_rec
    assert ("move_to_spot", "train") in kinds
    assert ("rightsize_cpu_mem", "etl") in kinds
    by = {(r.kind, r.workload): r for r in recs}
    assert by[("reclaim_idle_gpu", "etl")].est_monthly_savings_usd == pytest.approx(GPU_RATE * 730)
    spot = by[("move_to_spot", "train")]
    total = 2 * GPU_RATE + 4 * CPU_RATE + 16 * GIB_RATE
    assert spot.est_monthly_savings_usd == pytest.approx(total * 0.6 * 730, abs=0.01)
    cons = by[("consolidate_nodes", "nodepool/gpu")]
    assert cons.proposed["freed_nodes"] == ["n1"]
    assert sorted(m["pod"] for m in cons.proposed["moves"]) == ["data/etl-1", "ml/train-0"]
    assert cons.est_monthly_savings_usd == pytest.approx(NODE_PRICE * 730)
    assert cons.evidence["lower_bound"] == 1 and cons.evidence["gap"] == 0
    cpu = by[("rightsize_cpu_mem", "etl")]
    target = 0.01 * 1.05**81 * 1.15
    assert cpu.proposed["cpu"]["target"] == pytest.approx(target, abs=1e-4)
    for r in recs:
        assert r.evidence and r.est_monthly_savings_usd != 0


def test_run_writes_with_stable_ids_and_reruns_update(world: Settings) -> None:
    first = run(world, now=T0 + timedelta(hours=HOURS))
    assert first.written["inserted"] == len(first.recommendations) > 0
    second = run(world, now=T0 + timedelta(hours=HOURS + 1))
    assert second.written["inserted"] == 0 and second.written["updated"] == len(first.recommendations)
    rows = RecommendationStore(world.effective_app_db_url).list()
    assert len(rows) == len(first.recommendations)
    assert stable_id("reclaim_idle_gpu", "c1", "data", "etl") in {r["id"] for r in rows}


def test_cli_recommend(world: Settings, tmp_path: Path) -> None:
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = world

    recommend_cmd.register(app)
    res = CliRunner().invoke(app, ["recommend", "--dry-run", "--top", "3"])
    assert res.exit_code == 0, res.output
    assert "consolidate_nodes" in res.output and "dry run" in res.output


def test_missing_warehouse_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="gpufinops build"):
        load_input(Settings(home=tmp_path))


def test_binpack_view_from_the_warehouse(world: Settings) -> None:
    from recommender.binpack import load_binpack

    [view] = load_binpack(world)
    assert view["cluster"] == "c1"
    assert sorted(m["pod"] for m in view["suggested_moves"]) == ["data/etl-1", "ml/train-0"]
    frag = view["fragmentation"]
    # Free GPUs: n1 has 8 - 3 = 5, n2 has 8 - 2 = 6 whole devices; every task shape (1 or 2 whole GPUs)
    # fits on both nodes and whole free devices strand nothing.
    assert frag["free_gpus"] == pytest.approx(11.0) and frag["fragmentation_gpus"] == pytest.approx(0.0)
