"""End-to-end: a hand-made lake (tests/fixtures/warehouse/small_lake.py) through `dbt build`.

Two builds per session: a full refresh with the dbt unit tests, then (through the CLI) an
incremental build after one more hour lands, carrying an over-allocated time-sliced GPU. The
expected numbers are worked out by hand from the fixture's prices and requests (see its docstring).
"""

from __future__ import annotations

import importlib.util
import json
import math
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from gpufinops.settings import Settings

_FIXTURE = Path(__file__).parent / "fixtures" / "warehouse" / "small_lake.py"
_spec = importlib.util.spec_from_file_location("warehouse_small_lake", _FIXTURE)
lake = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(lake)

pytestmark = pytest.mark.timeout(600)
H10 = "2026-11-02 10:00:00"
H11 = "2026-11-02 11:00:00"
H12 = "2026-11-02 12:00:00"


@pytest.fixture(scope="session")
def full_build(small_lake_build):
    """The session's small-lake warehouse (tests/conftest.py; the recommender tests read it too)."""
    return small_lake_build


def _q(settings, sql, params=None):
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def _pod(settings, pod, hour=None):
    where = "pod = ?" + (" and hour = ?" if hour else "")
    params = [pod] + ([hour] if hour else [])
    (row,) = _q(settings, f"""
        select sum(gpu_hours), sum(measured_gpu_hours), sum(utilized_gpu_hours), sum(idle_gpu_hours),
               sum(unmeasured_gpu_hours), sum(gpu_cost_usd), sum(idle_cost_usd), sum(cpu_cost_usd),
               sum(memory_cost_usd), sum(total_cost_usd), any_value(team), any_value(tenant),
               any_value(tier), any_value(gpu_resource), max(gpu_equiv)
        from fct_gpu_allocation_hourly where {where}""", params)
    keys = ["gpu_hours", "measured", "utilized", "idle", "unmeasured", "gpu_cost", "idle_cost", "cpu_cost",
            "mem_cost", "total", "team", "tenant", "tier", "resource", "equiv"]
    return dict(zip(keys, row, strict=True))


def test_build_ran_models_data_tests_and_unit_tests(full_build):
    _, result, _ = full_build
    assert result.success and not result.failed
    assert result.count("model") >= 20
    assert result.count("unit_test", "pass") >= 10
    assert result.count("test", "pass") >= 50


def test_whole_gpu_pod_on_8_gpu_node(full_build):
    settings, _, _ = full_build
    # 1 GPU for 2 h at u = 0.5 on a $9/h node: unit = 9 / (9*8 + 0.9*10 + 0.1*90) = 0.1 -> $0.9/GPU-h
    p = _pod(settings, "train-a")
    assert p["gpu_hours"] == pytest.approx(2.0)
    assert p["measured"] == pytest.approx(2.0) and p["utilized"] == pytest.approx(1.0) and p["idle"] == pytest.approx(1.0)
    assert p["gpu_cost"] == pytest.approx(1.8) and p["idle_cost"] == pytest.approx(0.9)
    # CPU: usage 3 cores > request 2 -> 3 * 2 h * $0.09; memory: request 10 GiB > usage 5 -> 10 * 2 * $0.01
    assert p["cpu_cost"] == pytest.approx(0.54) and p["mem_cost"] == pytest.approx(0.2)
    assert p["total"] == pytest.approx(2.54)
    # the pod label wins over the namespace label; tenant from the namespace label
    assert (p["team"], p["tenant"], p["tier"]) == ("pod-team", "research", "training")


def test_unmeasured_pod_is_counted_not_guessed(full_build):
    settings, _, _ = full_build
    p = _pod(settings, "serve-b")  # 2 GPUs requested through limits only, no DCGM series
    assert p["gpu_hours"] == pytest.approx(4.0) and p["unmeasured"] == pytest.approx(4.0)
    assert p["measured"] == 0 and p["utilized"] == 0 and p["idle"] == 0 and p["idle_cost"] == 0
    assert p["gpu_cost"] == pytest.approx(3.6)
    assert (p["team"], p["tenant"], p["tier"]) == ("ann-team", "ann-tenant", "serving")  # namespace annotation


def test_time_sliced_mig_fractional_and_spot(full_build):
    settings, _, _ = full_build
    for name in ("share-c", "share-d"):
        p = _pod(settings, name)
        # 1 of 4 replicas -> 0.25 GPU; the device is 40 % busy (gpu_util, no gr_engine_active) and
        # split between two 0.25 pods -> each is 0.4 / 0.5 = 80 % busy; known $1/GPU-h
        assert p["equiv"] == pytest.approx(0.25) and p["gpu_hours"] == pytest.approx(0.5)
        assert p["utilized"] == pytest.approx(0.4) and p["gpu_cost"] == pytest.approx(0.5)
        assert p["cpu_cost"] == pytest.approx(0.18) and p["mem_cost"] == pytest.approx(0.02)
    mig = _pod(settings, "mig-e")  # 1g.10gb on A100-80GB = 1/7 GPU; override price $7.6/h -> $3.6/GPU-h
    assert mig["equiv"] == pytest.approx(1 / 7) and mig["resource"] == "nvidia.com/mig-1g.10gb"
    assert mig["gpu_cost"] == pytest.approx(2 / 7 * 3.6) and mig["utilized"] == pytest.approx(2 / 7 * 0.3)
    milli = _pod(settings, "milli-f")  # gpu-milli 470 wins over gpu.shared; device 23.5 % busy -> 50 %
    assert milli["equiv"] == pytest.approx(0.47) and milli["resource"] == "gpu-milli"
    assert milli["idle"] == pytest.approx(0.47) and milli["idle_cost"] == pytest.approx(0.423, rel=1e-6)
    spot = _pod(settings, "spot-g")  # 4 GPUs for 1 h at the spot price $3.6/h -> $0.36/GPU-h; series on 2 devices at 100 %
    assert spot["gpu_hours"] == pytest.approx(4.0) and spot["gpu_cost"] == pytest.approx(1.44)
    assert spot["utilized"] == pytest.approx(4.0) and spot["idle_cost"] == pytest.approx(0.0)


def test_nodes_unallocated_and_unpriced(full_build):
    settings, _, _ = full_build
    rows = {r[0]: r[1:] for r in _q(settings, """
        select node, sum(node_cost_usd), sum(unallocated_cost_usd), sum(overcommit_cost_usd),
               sum(unallocated_gpu_hours), any_value(price_source)
        from fct_node_hourly where hour < '2026-11-02 12:00:00' group by node""")}
    # gpu8: $18 minus its pods 2.54 + 3.8 + 1.046 + 0.1; GPU-hours 16 - (2 + 4 + 0.94)
    assert rows["gpu8"][0] == pytest.approx(18.0) and rows["gpu8"][1] == pytest.approx(10.514)
    assert rows["gpu8"][3] == pytest.approx(9.06) and rows["gpu8"][2] == pytest.approx(0.0)
    assert rows["ts"][1] == pytest.approx(4.0 - 1.4) and rows["ts"][3] == pytest.approx(1.0)
    assert rows["mig"][4] == "override" and rows["mig"][0] == pytest.approx(15.2)
    assert rows["nop"][4] == "unpriced" and rows["nop"][0] == 0 and rows["nop"][3] == pytest.approx(4.0)
    assert _q(settings, "select node, unpriced_hours from dq_unpriced_nodes") == [("nop", 2)]
    # the unpriced node's CPU pod still shows, at cost 0
    assert _pod(settings, "cpu-h")["total"] == 0


def test_conservation_and_showback_total(full_build):
    settings, _, _ = full_build
    for cluster, hour, pods, unalloc, over, node in _q(settings, """
            select n.cluster, n.hour, p.cost, n.unalloc, n.overc, n.cost from
            (select cluster, hour, sum(unallocated_cost_usd) unalloc, sum(overcommit_cost_usd) overc,
                    sum(node_cost_usd) cost from fct_node_hourly group by all) n
            join (select cluster, hour, sum(total_cost_usd) cost from fct_gpu_allocation_hourly group by all) p
            using (cluster, hour)"""):
        assert pods + unalloc - over == pytest.approx(node, rel=1e-9), (cluster, hour)
    day = _q(settings, """select sum(chargeback_usd), sum(shared_cost_usd), sum(unallocated_share_usd)
                           from fct_showback_daily where day = '2026-11-02' and cluster = 'c1'""")[0]
    node_cost = _q(settings, "select sum(node_cost_usd) from fct_node_hourly where cluster = 'c1' and hour < ?", [H12])[0][0]
    assert node_cost == pytest.approx(44.4)
    # + fixed overhead $0.10/h over the cluster's 2 covered hours (3 after the incremental hour)
    hours = _q(settings, "select sum(covered_s) / 3600 from int_snapshot_hours where cluster = 'c1'")[0][0]
    total = _q(settings, "select sum(node_cost_usd) from fct_node_hourly where cluster = 'c1'")[0][0]
    assert day[0] == pytest.approx(total + 0.10 * hours, rel=1e-9)
    assert day[1] == pytest.approx(0.0, abs=1e-9) and day[2] == pytest.approx(0.0, abs=1e-9)


def test_showback_lines_and_idle_pct(full_build):
    settings, _, _ = full_build
    lines = {(r[0], r[1]): r[2:] for r in _q(settings, """
        select namespace, team, direct_cost_usd, shared_cost_usd, chargeback_usd, idle_allocated_pct, gpu_hours
        from fct_showback_daily where day = '2026-11-02' and cluster = 'c1'""")}
    assert ("(unallocated)", "unassigned") in lines and ("(overhead)", "unassigned") in lines
    # kube-system is shared: its direct cost is handed out (proportional to GPU cost) -> chargeback 0
    ks = lines[("kube-system", "unassigned")]
    assert ks[0] > 0 and ks[1] == pytest.approx(-ks[0]) and ks[2] == pytest.approx(0.0, abs=1e-12)
    received = sum(v[1] for k, v in lines.items() if k[0] not in ("kube-system", "(overhead)", "(unallocated)"))
    assert received > 0
    # namespace ann (serve-b) has only unmeasured hours -> idle % unknown, not 0
    assert lines[("ann", "ann-team")][3] is None


def test_capacity_fragmentation_and_lower_bound(full_build):
    settings, _, _ = full_build
    (cap, alloc, frag, free, lb, in_use, pending) = _q(settings, """
        select gpu_capacity, gpu_allocated, fragmentation_gpus, free_gpus, nodes_lower_bound, nodes_in_use,
               pending_gpu_pods from fct_cluster_capacity_hourly where hour = ?""", [H10])[0]
    assert cap == pytest.approx(20.0) and pending == 1
    assert alloc == pytest.approx(1 + 2 + 0.47 + 0.25 + 0.25 + 1 / 7 + 4)
    # free fractions at 10:00: gpu8 [0,0,0,0.53,1,1,1,1] (whole GPUs first, then 0.47 best-fit),
    # spot8 4 free, ts 0.5, mig 6/7, nop [1, 1]. Shapes of the 8 workload pods (the DaemonSet is a
    # system pod): (1 cpu, 0.25) x2 and six singletons (p = 1/8), one of them CPU-only (cpu-h, 4 cores).
    # The whole-GPU shapes fragment 1 GPU (a+b+c), 2 GPUs (a+b+c), 4 GPUs (a+b+c + nop's 2); the
    # CPU-only shape strands every free GPU (the FGD authors' rule, DESIGN §3). milli-f's required
    # node affinity allows A100-80GB or H100 only, so the T4 node's free 0.5 strands its 0.47 shape.
    a, b, c = 0.53, 0.5, 6 / 7
    assert free == pytest.approx(4.53 + 4 + b + c + 2)
    assert frag == pytest.approx((3 * (a + b + c) + 2 + free + b) / 8)
    # pools: test.8gpu (7.47 GPUs on 8-GPU nodes -> 1), test.ts, test.mig, test.unknown -> 4; in use 5
    assert (lb, in_use) == (4, 5)


def test_gpu_model_constraint_from_required_node_affinity(full_build):
    # terms ORed, a term's In lists intersected; a term that does not name the product lifts it
    settings, _, _ = full_build
    rows = dict(_q(settings, "select pod, gpu_model_constraint from int_pod_specs where pod in ('milli-f', 'share-c', 'train-a')"))
    assert rows == {"milli-f": "NVIDIA-A100-SXM4-80GB|NVIDIA-H100-80GB-HBM3", "share-c": None, "train-a": None}
    # carried to the pod facts `gpufinops simulate --cluster` reads
    (got,) = _q(settings, "select distinct gpu_model_constraint from fct_gpu_allocation_hourly where pod = 'milli-f'")
    assert got == ("NVIDIA-A100-SXM4-80GB|NVIDIA-H100-80GB-HBM3",)


def test_bill_reconciliation(full_build):
    settings, _, _ = full_build
    rows = {r[0]: r[1:] for r in _q(settings, """
        select resource_id, computed_cost_usd, effective_cost_usd, difference_usd, status
        from fct_bill_reconciliation_daily where day = '2026-11-02' and provider = 'aws'""")}
    assert rows["arn:aws:ec2:us-east-1:123456789012:instance/i-gpu80000"][3] == "matched"
    assert rows["i-spot80000"][0] == pytest.approx(7.2) and rows["i-spot80000"][2] == pytest.approx(2.2)
    assert rows["i-spot80000"][3] == "mismatch"
    assert rows["vol-0123"][0] is None and rows["vol-0123"][3] == "only_in_bill"
    # nodes without a bill line on a day the bill covers
    assert {k for k, v in rows.items() if v[3] == "only_computed"} == {"i-ts0000", "i-mig0000", "i-nop0000"}


def test_coverage_timeline_has_no_gaps(full_build):
    settings, _, _ = full_build
    assert _q(settings, "select count(*) from int_coverage_gaps")[0][0] == 0
    assert _q(settings, "select sum(covered_s) from int_snapshot_timeline where cluster = 'c1'")[0][0] >= 7200


@pytest.fixture(scope="session")
def incremental_build(full_build, tmp_path_factory):
    """One more hour lands (12:00-13:00) with three extra 0.25-GPU pods on the 1-GPU time-sliced node.

    It builds a copy of the shared small-lake home, which the recommender tests also read."""
    import shutil

    from cli.main import app

    shared, _, before = full_build
    home = tmp_path_factory.mktemp("wh-incremental") / "home"
    shutil.copytree(shared.home, home, symlinks=True)  # the live link stays relative to the copy
    settings = Settings(home=home, config=home / Path(shared.config).name)
    state = home / "dbt" / "seeds.json"  # the seed record names the warehouse it was built into
    if state.is_file() and "warehouse" in (record := json.loads(state.read_text())):
        state.write_text(json.dumps(record | {"warehouse": str(Path(settings.warehouse_path).resolve())}))
    extra = [(lake._pod("ml", f"over-{i}", "ts", {"cpu": 1.0, "memory": 1.0 * lake.GIB, "nvidia.com/gpu": 1.0}), 2)
             for i in range(3)]
    lake.write_small_lake(settings.lake_dir, start=lake.T0 + timedelta(hours=2), hours=1, extra_pods=extra)
    # a second cluster whose data lands late: a day older than c1's newest hour
    lake.write_small_lake(settings.lake_dir, start=lake.T0 - timedelta(days=1), hours=1, cluster="c2")
    out = CliRunner().invoke(app, ["--home", str(settings.home), "--config", str(settings.config), "build"])
    return settings, out, before


def test_incremental_build_adds_the_new_hour_only(incremental_build):
    settings, out, before = incremental_build
    assert out.exit_code == 0, out.output
    assert "full rebuild" not in out.output
    assert "Top tenants" in out.output and "idle-allocated" in out.output
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    try:
        old_alloc = con.sql(f"select * from fct_gpu_allocation_hourly where cluster = 'c1' and hour < '{H12}' order by hour, pod").fetchall()
        old_nodes = con.sql(f"select * from fct_node_hourly where cluster = 'c1' and hour < '{H12}' order by hour, node").fetchall()
        new_pods = con.execute(f"select count(*), sum(unmeasured_gpu_hours) from fct_gpu_allocation_hourly where cluster = 'c1' and hour = '{H12}'").fetchone()
    finally:
        con.close()
    assert len(old_alloc) == len(before["alloc"]) and len(old_nodes) == len(before["nodes"])
    for got, want in zip(old_alloc, before["alloc"], strict=True):
        assert [x if not isinstance(x, float) else round(x, 9) for x in got] == \
               [x if not isinstance(x, float) else round(x, 9) for x in want]
    # 9 pods of the first hours that run on + 3 new ones; no DCGM series in the new hour
    assert new_pods[0] == 11 and new_pods[1] > 0


def test_a_late_cluster_is_not_skipped_by_the_incremental_build(incremental_build):
    settings, out, _ = incremental_build
    assert out.exit_code == 0
    rows = _q(settings, "select min(hour)::varchar, count(distinct node), sum(node_cost_usd) from fct_node_hourly where cluster = 'c2'")
    # one hour of the five nodes: 9 + 3.6 + 2 + 7.6 + 0
    assert rows == [("2026-11-01 10:00:00", 5, pytest.approx(22.2))]


def test_overallocation_is_flagged_and_cost_still_conserved(incremental_build):
    settings, out, _ = incremental_build
    assert out.exit_code == 0
    rows = _q(settings, "select hour, node, overallocated_gpu_hours, overcommit_gpu_cost_usd, issue from dq_overallocation where cluster = 'c1'")
    assert len(rows) == 1
    hour, node, over_h, over_usd, issue = rows[0]
    # five 0.25-GPU pods on one physical GPU for 1 h: 0.25 GPU-h over; GPU part billed $1.25 of $1
    assert (str(hour), node, issue) == (H12, "ts", "gpu_overallocated")
    assert over_h == pytest.approx(0.25) and over_usd == pytest.approx(0.25)
    (pods, unalloc, over, node_cost) = _q(settings, f"""
        select (select sum(total_cost_usd) from fct_gpu_allocation_hourly where cluster = 'c1' and hour = '{H12}'),
               sum(unallocated_cost_usd), sum(overcommit_cost_usd), sum(node_cost_usd)
        from fct_node_hourly where cluster = 'c1' and hour = '{H12}'""")[0]
    assert math.isclose(pods + unalloc - over, node_cost, rel_tol=1e-9)
