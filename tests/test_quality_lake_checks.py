"""Lake-level suites over a small hand-made lake, and ``gpufinops check``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from cli.main import app
from ingest.lake import LakeWriter, RunRecord, list_runs
from ingest.quality.lake_checks import run_lake_checks

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
DAY = timedelta(days=1)


def node(ts, name, itype, ctype="on_demand", gpus=8.0, extra=None, annotations=None, **kw):
    cap = [("cpu", 96.0), ("nvidia.com/gpu", gpus), *(extra or [])]
    return {"snapshot_ts": ts, "node": name, "provider": "aws", "region": "us-east-1", "instance_type": itype,
            "capacity_type": ctype, "capacity": cap, "allocatable": cap, "annotations": annotations or [], **kw}


def pod(ts, name, node_name, gpu=None, mig=None, init_gpu=None, limits_only=False, phase="Running"):
    req = [("cpu", 1.0)]
    lim = []
    if gpu is not None:
        (lim if limits_only else req).append(("nvidia.com/gpu", gpu))
    if mig is not None:
        req.append(("nvidia.com/mig-1g.10gb", mig))
    init = [{"name": "init", "requests": [("nvidia.com/gpu", init_gpu)], "limits": []}] if init_gpu else []
    return {"snapshot_ts": ts, "namespace": "ml", "pod": name, "uid": name, "node": node_name, "phase": phase,
            "containers": [{"name": "main", "requests": req, "limits": lim}], "init_containers": init}


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("lake")
    w = LakeWriter(root)
    nodes = [
        node(T0, "a", "p4d.24xlarge"),
        node(T0, "b", "p5.48xlarge"),  # no price at all
        node(T0, "c", "g5.xlarge", ctype="spot", gpus=4.0, gpu_replicas=4),
        node(T0, "d", "p5.48xlarge", annotations=[("gpufinops.io/price-usd-per-hour", "98.3")]),  # override
        node(T0, "m", "p4de.24xlarge", gpus=0.0, extra=[("nvidia.com/mig-1g.10gb", 14.0)]),
        node(T1, "a", "p4d.24xlarge"),  # after the p4d price expired
    ]
    pods = [
        pod(T0, "a1", "a", gpu=4.0), pod(T0, "a2", "a", gpu=4.0),  # exactly full: fine
        pod(T1, "a1", "a", gpu=4.0), pod(T1, "a2", "a", gpu=4.0), pod(T1, "a3", "a", gpu=2.0, limits_only=True),  # 10 > 8
        pod(T1, "done", "a", gpu=8.0, phase="Succeeded"),  # finished pods hold nothing
        pod(T0, "b1", "b", gpu=1.0, init_gpu=8.0),  # init container's 8 count: max(1, 8) = 8
        pod(T0, "c1", "c", gpu=1.0), pod(T0, "c2", "c", gpu=1.0), pod(T0, "c3", "c", gpu=1.0),  # 3 of 4 replicas
        pod(T0, "m1", "m", mig=7.0), pod(T0, "m2", "m", mig=8.0),  # 15 > 14 MIG slices
        pod(T0, "pending", None, gpu=8.0, phase="Pending"),
    ]
    with w.run("k8s", "c1", T0, T0 + DAY) as run:
        run.add("k8s_nodes", nodes)
        run.add("k8s_pods", pods)
    prices = [
        {"provider": "aws", "region": "us-east-1", "instance_type": "p4d.24xlarge", "capacity_type": "on_demand",
         "usd_per_hour": 32.77, "effective_from": T0 - DAY, "effective_to": T1, "source": "t"},
        {"provider": "aws", "region": "us-east-1", "instance_type": "g5.xlarge", "capacity_type": "spot",
         "usd_per_hour": 0.42, "effective_from": T0 - DAY, "source": "t"},
        {"provider": "aws", "region": "us-east-1", "instance_type": "p4de.24xlarge", "capacity_type": "on_demand",
         "usd_per_hour": 40.0, "effective_from": T0 - DAY, "source": "t"},
    ]
    w.write("prices", prices, source="csv", cluster="_prices", window_start=T0 - DAY, window_end=T0 + DAY)
    # A run record whose process died without recovery ever seeing it (no staging folder left).
    stale = RunRecord("20260101T000000Z-dead", "dcgm", "c1", T0.isoformat(), (T0 + DAY).isoformat(), "running", T0.isoformat())
    w._save_record(stale)
    return root


def _by_name(results):
    return {r.name: r for r in results}


def test_price_coverage_lists_the_missing_combinations_by_name(lake):
    r = _by_name(run_lake_checks(lake))["price_coverage"]
    assert not r.success and r.severity == "warning"
    assert r.message.startswith("k8s_nodes/prices: no price for 2 of 4 (provider/region/instance_type/capacity_type) seen on nodes: ")
    assert "aws/us-east-1/p4d.24xlarge/on_demand (1 node, 2026-01-01..2026-01-01)" in r.message  # expired at T1
    assert "aws/us-east-1/p5.48xlarge/on_demand (1 node," in r.message  # b; d has its own price annotation
    assert "g5.xlarge" not in r.message and "p4de" not in r.message
    assert {row["combination"] for row in r.failing} == {"aws/us-east-1/p4d.24xlarge/on_demand", "aws/us-east-1/p5.48xlarge/on_demand"}


def test_overallocation_is_found_per_node_resource_with_effective_requests(lake):
    r = _by_name(run_lake_checks(lake))["no_overallocation"]
    assert not r.success and r.severity == "error"
    bad = {(row["node"], row["resource"]): row for row in r.failing}
    assert set(bad) == {("a", "nvidia.com/gpu"), ("m", "nvidia.com/mig-1g.10gb")}
    assert (bad["a", "nvidia.com/gpu"]["requested"], bad["a", "nvidia.com/gpu"]["capacity"]) == (10.0, 8.0)
    assert bad["a", "nvidia.com/gpu"]["overallocated_snapshots"] == 1
    assert "c1/a nvidia.com/gpu 10 requested > 8 at 2026-01-01 00:01:00Z" in r.message
    assert "c1/m nvidia.com/mig-1g.10gb 15 requested > 14" in r.message
    assert r.checked == 4  # one row per node-resource: a, b (init container: max(1, 8) = 8 fits), c, m


def test_runs_without_a_final_status_are_named(lake):
    r = _by_name(run_lake_checks(lake))["runs_final"]
    assert not r.success
    assert r.message == ("_runs: 1 run record(s) without a final status: 20260101T000000Z-dead (running; dcgm c1 "
                         "2026-01-01T00:00:00+00:00..2026-01-02T00:00:00+00:00)")
    assert r.checked == len(list_runs(lake)) == 3


def test_a_clean_lake_passes_and_missing_tables_are_skipped(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("k8s_nodes", [node(T0, "a", "p4d.24xlarge", gpus=8.0)], source="k8s", cluster="c1", window_start=T0, window_end=T0 + DAY)
    results = _by_name(run_lake_checks(tmp_path, deep=True))
    assert results["no_overallocation"].skipped and "k8s_pods" in results["no_overallocation"].message
    assert not results["price_coverage"].success  # no prices table at all: every type is unpriced
    w.write("prices", [{"provider": "aws", "region": "us-east-1", "instance_type": "p4d.24xlarge", "capacity_type": "on_demand",
                        "usd_per_hour": 30.0, "effective_from": T0 - DAY, "source": "t"}],
            source="csv", cluster="_prices", window_start=T0 - DAY, window_end=T0 + DAY)
    results = _by_name(run_lake_checks(tmp_path, deep=True))
    assert all(r.success for r in results.values()), [r.message for r in results.values()]
    assert results["runs_final"].checked == 2 and results["duplicate_keys"].checked == 2


def test_duplicate_keys_across_runs_are_found_by_the_deep_check(tmp_path):
    w = LakeWriter(tmp_path)
    rows = [{"ts": T0, "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": 0.5}]
    w.write("gpu_samples", rows, source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    w.write("gpu_samples", rows, source="dcgm-file", cluster="c1", window_start=T0, window_end=T0 + DAY)  # same series
    assert "duplicate_keys" not in _by_name(run_lake_checks(tmp_path))
    (r,) = run_lake_checks(tmp_path, names=["duplicate_keys"])
    assert not r.success and r.message.startswith("duplicate keys across the lake: gpu_samples: 1 keys on 2 rows, e.g. ")


def test_cli_check_prints_the_report_and_exits_by_severity(lake):
    runner = CliRunner()
    home = lake.parent / "home"
    (home).mkdir(exist_ok=True)
    if not (home / "lake").exists():
        (home / "lake").symlink_to(lake)
    res = runner.invoke(app, ["--home", str(home), "check", "--json"])
    assert res.exit_code == 1, res.output
    out = {r["check"]: r for r in json.loads(res.output)}
    assert set(out) == {"price_coverage", "no_overallocation", "pods_on_known_nodes", "duplicate_prices", "runs_final",
                        "rejected_runs"}
    assert not out["no_overallocation"]["success"]
    res = runner.invoke(app, ["--home", str(home), "check", "--only", "price_coverage"])
    assert res.exit_code == 0 and "p5.48xlarge" in res.output  # a warning does not fail ...
    res = runner.invoke(app, ["--home", str(home), "check", "--only", "price_coverage", "--strict"])
    assert res.exit_code == 1  # ... unless --strict
    res = runner.invoke(app, ["--home", str(home), "check", "--only", "nope"])
    assert res.exit_code == 2 and "unknown lake check" in res.output


def test_files_written_without_the_gate_are_caught_by_the_deep_table_suites(tmp_path):
    from ingest.quality import QualityGate

    rows = [{"ts": T0 + timedelta(minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gpu_util": 140.0 if m == 2 else 50.0}
            for m in range(5)]
    LakeWriter(tmp_path, quality=QualityGate(suites={})).write(  # an old writer without the gate
        "gpu_samples", rows, source="old", cluster="c1", window_start=T0, window_end=T0 + DAY)
    assert "table_suites" not in _by_name(run_lake_checks(tmp_path))  # deep only
    (r,) = run_lake_checks(tmp_path, names=["table_suites"])
    assert not r.success
    assert r.message.startswith("gpu_samples: 1 of 1 files fail, first gpu_samples/cluster=c1/day=2026-01-01/old__")
    assert r.message.endswith("gpu_samples.gpu_util: 1 value outside [0, 100], e.g. 140.0")


def test_quarantined_runs_are_final_and_pointed_at(tmp_path):
    from gpufinops.errors import ValidationFailed

    rows = [{"ts": T0, "hostname": "h", "gpu": 0, "uuid": "u", "power_w": -1.0}]
    with pytest.raises(ValidationFailed):
        LakeWriter(tmp_path, quality="quarantine").write("gpu_samples", rows, source="dcgm", cluster="c1",
                                                         window_start=T0, window_end=T0 + DAY)
    (r,) = run_lake_checks(tmp_path, names=["runs_final"])
    assert r.success and r.message == "all 1 run records are final or in progress (1 quarantined: see _quarantine/<run_id>/reason.json)"
