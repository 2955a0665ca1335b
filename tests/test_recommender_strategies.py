"""Scenario tests with hand-computed answers for every strategy, including the tier gates.

The strategies are pure functions of a ``RecommenderInput``; these tests hand them small inputs so each
gate can be pinned. The MIG table is the warehouse's own (the ``mig_profiles`` seed of the dbt-built
``fleet`` fixture); the loader's reading of real marts is tested in test_recommender_loader.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from gpufinops.errors import ConfigError
from gpufinops.warehouse import connect
from recommender.engine import RecommenderConfig, plan
from recommender.histogram import CPU_SPEC, MEMORY_SPEC, DecayingHistogram
from recommender.mig import load_mig_profiles, smallest_fitting_profile
from recommender.model import ContainerUsage, HourUsage, RecommenderInput, WorkloadGpuUsage, stable_id
from recommender.strategies import STRATEGIES, build_strategies
from recommender.strategies.cpu_mem import CpuMemSettings, RightsizeCpuMem, rightsize_container
from recommender.strategies.gpu_rightsize import RightsizeFractional, RightsizeGpuCount
from recommender.strategies.reclaim_idle import ReclaimIdleGpu
from recommender.strategies.spot import MoveToSpot

END = datetime(2026, 11, 15, 0, tzinfo=UTC)
GIB = 1024.0**3


def hours(utils: list[float | None], *, cost: float = 2.0, gpu_hours: float = 1.0, fb: float = 1000.0,
          total_cost: float | None = None) -> tuple[HourUsage, ...]:
    """Hourly series ending at END (the last hour is END-1h)."""
    n = len(utils)
    return tuple(HourUsage(
        hour=END - timedelta(hours=n - i), util_mean=u, util_p95=None if u is None else min(1.0, u * 1.5),
        samples=0 if u is None else int(60 * gpu_hours), fb_used_max_mib=None if u is None else fb,
        gpu_hours=gpu_hours, gpu_cost_usd=cost, total_cost_usd=total_cost if total_cost is not None else cost * 1.2,
    ) for i, u in enumerate(utils))


def wl(name: str, tier: str, utils: list[float | None], **kw: object) -> WorkloadGpuUsage:
    base = dict(cluster="c1", namespace="ns", workload=name, tier=tier, workload_kind="Job", gpu_model="A100-80GB",
                gpu_resource="nvidia.com/gpu", hourly=hours(utils), replicas=1, gpus_per_pod=1, gpu_equiv_per_pod=1.0)
    base.update(kw)
    return WorkloadGpuUsage(**base)  # type: ignore[arg-type]


def data(*w: WorkloadGpuUsage, containers: tuple[ContainerUsage, ...] = (), mig=None) -> RecommenderInput:
    return RecommenderInput(now=END, window_start=END - timedelta(days=7), window_end=END, gpu_usage=w,
                            container_usage=containers, mig_profiles=dict(mig or {}))


@pytest.fixture(scope="module")
def mig_table(fleet):
    con = connect(fleet.warehouse, read_only=True)
    try:
        return load_mig_profiles(con)
    finally:
        con.close()


# -- reclaim_idle_gpu and its tier gates ---------------------------------------------------------

def test_batch_idle_for_the_window_is_reclaimed_with_evidence() -> None:
    recs = ReclaimIdleGpu().run(data(wl("etl", "batch", [0.9] * 4 + [0.01] * 8)))
    assert len(recs) == 1
    r = recs[0]
    assert r.kind == "reclaim_idle_gpu" and r.proposed["action"] == "reclaim"
    assert r.est_monthly_savings_usd == pytest.approx(2.0 * 730)  # $2/h GPU cost × 730 h
    ev = r.evidence
    assert ev["window_hours"] == 8 and ev["samples"] == 480 and ev["coverage"] == 1.0
    assert ev["util_mean"] == pytest.approx(0.01) and ev["util_p95"] == pytest.approx(0.015)
    assert ev["window_start"] == (END - timedelta(hours=8)).isoformat()
    assert ev["gpu_memory_used_max_mib"] == 1000.0


def test_batch_idle_shorter_than_the_window_is_not_reclaimed() -> None:
    assert ReclaimIdleGpu().run(data(wl("etl", "batch", [0.9] * 4 + [0.01] * 5))) == []


def test_unmeasured_hour_breaks_the_idle_run() -> None:
    # 10 idle hours, but the 5th from the end has no DCGM samples: it is not 0%, so only 4 count.
    utils: list[float | None] = [0.0] * 5 + [None] + [0.0] * 4
    assert ReclaimIdleGpu().run(data(wl("etl", "batch", utils))) == []


def test_serving_at_zero_is_never_preempted() -> None:
    recs = ReclaimIdleGpu().run(data(wl("api", "serving", [0.0] * 48, workload_kind="Deployment", replicas=3)))
    assert [r.kind for r in recs] == ["scale_to_zero_window"]
    assert all(r.kind != "reclaim_idle_gpu" for r in recs)
    r = recs[0]
    assert r.proposed["min_replicas"] == 1
    assert r.proposed["scale_to_zero_utc_hours"] == list(range(24))
    assert r.risk == "medium"


def test_serving_with_a_nightly_lull_gets_a_window_not_an_eviction() -> None:
    # Two days: busy 08-20 UTC, idle otherwise -> a 12-hour scale-to-zero window, savings 12/24 of cost.
    utils = [(0.4 if 8 <= h % 24 < 20 else 0.0) for h in range(48)]
    recs = ReclaimIdleGpu().run(data(wl("api", "serving", utils, workload_kind="Deployment")))
    assert len(recs) == 1 and recs[0].kind == "scale_to_zero_window"
    # One contiguous window across midnight, in window order.
    assert recs[0].proposed["scale_to_zero_utc_hours"] == [20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7]
    assert recs[0].est_monthly_savings_usd == pytest.approx(2.0 * 730 * 12 / 24)


def test_serving_window_needs_repeated_days_and_one_block() -> None:
    # One day only: a lull seen once is not a daily pattern.
    one_day = [(0.4 if 8 <= h < 20 else 0.0) for h in range(24)]
    assert ReclaimIdleGpu().run(data(wl("api", "serving", one_day, workload_kind="Deployment"))) == []
    # Two idle blocks per day (01-05 and 13-15): only the longer one becomes the window.
    utils = [(0.0 if (1 <= h % 24 < 6 or 13 <= h % 24 < 16) else 0.4) for h in range(48)]
    recs = ReclaimIdleGpu().run(data(wl("api", "serving", utils, workload_kind="Deployment")))
    assert recs[0].proposed["scale_to_zero_utc_hours"] == [1, 2, 3, 4, 5]
    assert recs[0].est_monthly_savings_usd == pytest.approx(2.0 * 730 * 5 / 24, abs=0.01)


def test_training_stopped_only_when_checkpointed() -> None:
    recs = {r.workload: r for r in ReclaimIdleGpu().run(data(
        wl("ckpt", "training", [0.0] * 7, checkpointed=True),
        wl("nockpt", "training", [0.0] * 7, checkpointed=False)))}
    assert recs["ckpt"].proposed["action"] == "stop" and recs["ckpt"].risk == "low"
    assert recs["nockpt"].proposed["action"] == "flag_owner"
    assert recs["nockpt"].confidence < recs["ckpt"].confidence


def test_notebooks_stop_after_their_own_idle_hours() -> None:
    recs = ReclaimIdleGpu({"window_hours": {"interactive": 3, "batch": 6}}).run(data(
        wl("nb", "interactive", [0.5] + [0.0] * 3), wl("nb2", "interactive", [0.5] + [0.0] * 2)))
    assert [(r.workload, r.proposed["action"]) for r in recs] == [("nb", "stop_notebook")]


def test_system_tier_is_never_touched() -> None:
    assert ReclaimIdleGpu().run(data(wl("dcgm", "system", [0.0] * 24))) == []


def test_a_workload_that_is_gone_is_not_reclaimed() -> None:
    old = wl("old", "batch", [0.0] * 10)
    shifted = tuple(HourUsage(h.hour - timedelta(hours=10), h.util_mean, h.util_p95, h.samples, h.fb_used_max_mib,
                              h.gpu_hours, h.gpu_cost_usd) for h in old.hourly)
    assert ReclaimIdleGpu().run(data(wl("old", "batch", [0.0], hourly=shifted))) == []


# -- rightsize_gpu_count -------------------------------------------------------------------------

def test_multi_gpu_pod_with_idle_devices_gets_the_busy_count() -> None:
    w = wl("ddp", "training", [0.3] * 12, gpus_per_pod=4, gpu_equiv_per_pod=4.0, device_p95=(0.6, 0.5, 0.01, 0.0),
           hourly=hours([0.3] * 12, cost=8.0, gpu_hours=4.0))
    recs = RightsizeGpuCount().run(data(w))
    assert len(recs) == 1
    assert recs[0].current["gpus_per_pod"] == 4 and recs[0].proposed["gpus_per_pod"] == 2
    assert recs[0].est_monthly_savings_usd == pytest.approx(8.0 * 730 * 2 / 4)


def test_multi_gpu_pod_with_all_devices_busy_is_left_alone() -> None:
    w = wl("ddp", "training", [0.8] * 12, gpus_per_pod=2, device_p95=(0.9, 0.8))
    assert RightsizeGpuCount().run(data(w)) == []


# -- rightsize_to_mig / enable_time_slicing ------------------------------------------------------

@pytest.mark.parametrize(
    ("model", "peak_gib", "p95", "profile", "equiv"),
    [
        ("A100-80GB", 7, 0.10, "1g.10gb", 1 / 7),   # 7 GiB × 1.2 = 8.4 -> 10 GB, compute 1/7 ≥ 0.10
        ("A100-80GB", 9, 0.10, "1g.20gb", 0.25),    # 10.8 GiB needs the 20 GB slice: max(1/7, 2/8)
        ("A100-80GB", 7, 0.20, "2g.20gb", 2 / 7),   # p95 0.20 > 1/7: two compute slices
        ("H200", 14, 0.10, "1g.18gb", 1 / 7),  # 16.8 GiB -> 18 GB
        ("H200", 20, 0.10, "1g.35gb", 0.25),   # 24 GiB -> 35 GB
    ],
)
def test_mig_choice(mig_table, model: str, peak_gib: float, p95: float, profile: str, equiv: float) -> None:
    device_mib = 141 * 1024 if "H200" in model else 80 * 1024
    w = wl("inf", "batch", [p95 / 1.5] * 12, gpu_model=model, gpu_family=model, util_p95=p95,
           peak_fb_used_mib=peak_gib * 1024, device_memory_mib=device_mib, hourly=hours([p95 / 1.5] * 12, cost=4.0))
    recs = RightsizeFractional().run(data(w, mig=mig_table))
    assert len(recs) == 1 and recs[0].kind == "rightsize_to_mig"
    assert recs[0].proposed["mig_profile"] == profile
    assert recs[0].proposed["resource"] == f"nvidia.com/mig-{profile}"
    assert recs[0].proposed["gpu_equiv"] == pytest.approx(equiv, abs=1e-4)
    assert recs[0].est_monthly_savings_usd == pytest.approx((1 - equiv) * 4.0 * 730, abs=0.01)


def test_no_mig_profile_when_memory_does_not_fit(mig_table) -> None:
    assert smallest_fitting_profile(mig_table, "A100-80GB", 70 * 1024) is None  # 84 GiB > 80
    assert smallest_fitting_profile(mig_table, "unknown", 1024) is None  # no MIG on T4 (family 'unknown')


def test_time_slicing_where_the_model_has_no_mig() -> None:
    # T4 16 GiB: need = max(p95 0.10, 2 GiB × 1.2 / 16 GiB = 0.15) -> ⌊1/0.15⌋ = 6, capped at 4 replicas.
    w = wl("small", "batch", [0.05] * 12, gpu_model="Tesla-T4", util_p95=0.10, peak_fb_used_mib=2048,
           device_memory_mib=16384, hourly=hours([0.05] * 12, cost=0.5))
    recs = RightsizeFractional().run(data(w))
    assert len(recs) == 1 and recs[0].kind == "enable_time_slicing"
    assert recs[0].proposed["time_slicing_replicas"] == 4
    assert recs[0].est_monthly_savings_usd == pytest.approx(0.75 * 0.5 * 730)


def test_busy_or_memory_heavy_pods_are_not_sliced() -> None:
    busy = wl("busy", "batch", [0.6] * 12, util_p95=0.7, peak_fb_used_mib=2048, device_memory_mib=81920)
    heavy = wl("heavy", "batch", [0.05] * 12, util_p95=0.1, peak_fb_used_mib=60000, device_memory_mib=81920)
    assert RightsizeFractional().run(data(busy, heavy)) == []


# -- move_to_spot --------------------------------------------------------------------------------

def test_checkpointed_training_on_demand_moves_to_spot() -> None:
    w = wl("train", "training", [0.9] * 24, checkpointed=True, capacity_type="on_demand",
           on_demand_usd_per_hour=32.0, spot_usd_per_hour=12.8, hourly=hours([0.9] * 24, cost=8.0, total_cost=10.0))
    not_ckpt = wl("t2", "training", [0.9] * 24, checkpointed=False, capacity_type="on_demand")
    on_spot = wl("t3", "training", [0.9] * 24, checkpointed=True, capacity_type="spot")
    recs = MoveToSpot().run(data(w, not_ckpt, on_spot))
    assert [r.workload for r in recs] == ["train"]
    assert recs[0].evidence["spot_discount"] == pytest.approx(0.6)
    assert recs[0].est_monthly_savings_usd == pytest.approx(10.0 * 0.6 * 730)


# -- rightsize_cpu_mem ---------------------------------------------------------------------------

def container(cpu: float, mem: float, *, days: float = 7, cpu_req: float | None = 2.0, mem_req: float | None = 4 * GIB,
              mem_limit: float | None = None, peak: float | None = None) -> ContainerUsage:
    n = int(days * 1440)
    times = END.timestamp() - 60.0 * np.arange(n)[::-1]
    ch, mh = DecayingHistogram(CPU_SPEC), DecayingHistogram(MEMORY_SPEC)
    ch.add(np.full(n, cpu), times, reference=END)
    mh.add(np.full(n, mem), times, reference=END)
    return ContainerUsage(cluster="c1", namespace="ns", workload="web", container="app", tier="serving",
                          cpu_request=cpu_req, memory_request=mem_req, memory_limit=mem_limit,
                          cpu_buckets=ch.weights, memory_buckets=mh.weights, samples=n,
                          first_sample=END - timedelta(days=days), last_sample=END, memory_peak=peak or mem,
                          cpu_cost_usd_per_core_hour=0.04, memory_cost_usd_per_gib_hour=0.005)


def test_cpu_mem_target_is_p90_plus_margin() -> None:
    c = container(0.5, 1 * GIB)
    r = rightsize_container(c, CpuMemSettings())
    # 0.5 cores falls in bucket ⌊ln(0.5/0.01)/ln 1.05⌋ = 80, whose upper edge is 0.01·1.05^81.
    assert r["cpu"]["target"] == pytest.approx(0.01 * 1.05**81 * 1.15)
    assert r["memory"]["target"] == pytest.approx(1e7 * 1.05**96 * 1.15)  # 1 GiB: bucket 95
    # Seven days of history: the upper bound is widened by (1 + 1/7).
    assert r["cpu"]["upper_bound"] == pytest.approx(0.01 * 1.05**81 * 1.15 * (1 + 1 / 7))
    recs = RightsizeCpuMem().run(data(containers=(c,)))
    assert len(recs) == 1
    saving = ((2.0 - r["cpu"]["target"]) * 0.04 + (4 * GIB - r["memory"]["target"]) / GIB * 0.005) * 730
    assert recs[0].est_monthly_savings_usd == pytest.approx(saving, abs=0.01)
    assert recs[0].proposed["cpu"]["target"] == pytest.approx(r["cpu"]["target"], abs=1e-4)


def test_cpu_mem_minimums_and_short_history_widen_bounds() -> None:
    tiny = rightsize_container(container(0.001, 10 * 1024**2), CpuMemSettings())
    assert tiny["cpu"]["target"] == pytest.approx(0.025) and tiny["memory"]["target"] == pytest.approx(250 * 1024**2)
    long = rightsize_container(container(0.5, GIB, days=7), CpuMemSettings())
    short = rightsize_container(container(0.5, GIB, days=2 / 24), CpuMemSettings())
    assert short["cpu"]["upper_bound"] > 5 * long["cpu"]["upper_bound"]
    assert short["cpu"]["target"] == pytest.approx(long["cpu"]["target"])


def test_memory_is_oom_aware() -> None:
    c = container(0.5, 1 * GIB, mem_req=GIB, mem_limit=GIB, peak=GIB)
    r = rightsize_container(c, CpuMemSettings())
    assert r["memory"]["target"] >= 1.2 * GIB and r["meta"]["oom_risk"] == 1.0


def test_small_changes_are_not_proposed() -> None:
    target = 0.01 * 1.05**81 * 1.15
    c = container(0.5, 1 * GIB, cpu_req=target * 1.05, mem_req=1e7 * 1.05**96 * 1.15)
    assert RightsizeCpuMem().run(data(containers=(c,))) == []


# -- registry, ids, settings ---------------------------------------------------------------------

def test_registry_holds_every_kind_and_settings_are_validated() -> None:
    kinds = {k for cls in STRATEGIES.values() for k in cls.kinds}
    assert {"reclaim_idle_gpu", "rightsize_gpu_count", "rightsize_to_mig", "enable_time_slicing", "rightsize_cpu_mem",
            "consolidate_nodes", "move_to_spot", "scale_to_zero_window"} <= kinds
    with pytest.raises(ConfigError, match="reclaim_idle_gpu"):
        build_strategies({"reclaim_idle_gpu": {"util_threshold": 3}})
    with pytest.raises(ConfigError, match="unknown"):
        build_strategies({"nope": {}})


def test_ids_are_stable_and_distinct() -> None:
    d = data(wl("etl", "batch", [0.0] * 8), wl("etl2", "batch", [0.0] * 8))
    a = plan(d, RecommenderConfig(), only=["reclaim_idle_gpu"])
    b = plan(d, RecommenderConfig(), only=["reclaim_idle_gpu"])
    assert [r.id for r in a] == [r.id for r in b] and len({r.id for r in a}) == 2
    assert a[0].id == stable_id("reclaim_idle_gpu", "c1", "ns", a[0].workload)


def test_significance_threshold_drops_tiny_findings() -> None:
    w = wl("etl", "batch", [0.0] * 8, hourly=hours([0.0] * 8, cost=0.001))
    assert ReclaimIdleGpu().run(data(w)) == []  # $0.73/month < $1
    assert len(ReclaimIdleGpu({"min_monthly_savings_usd": 0.5}).run(data(w))) == 1


def test_mig_table_is_the_warehouse_seed(mig_table) -> None:
    # DESIGN §3 memory slices, read from the warehouse's mig_profiles seed table (the only copy).
    assert {p.profile: p.memory_slices for p in mig_table["A100-80GB"]} == {
        "1g.10gb": 1, "1g.20gb": 2, "2g.20gb": 2, "3g.40gb": 4, "4g.40gb": 4, "7g.80gb": 8}
    assert set(mig_table) >= {"A100-40GB", "A100-80GB", "H100-80GB", "H200"}
    # 1g.10gb is 2 memory slices on A100-40GB but 1 on A100-80GB.
    a40 = {p.profile: p for p in mig_table["A100-40GB"]}
    a80 = {p.profile: p for p in mig_table["A100-80GB"]}
    assert a40["1g.10gb"].gpu_equiv == pytest.approx(0.25) and a80["1g.10gb"].gpu_equiv == pytest.approx(1 / 7)
