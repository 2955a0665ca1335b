"""The landing-table suites: each rule rejects real-looking bad data with a message naming the
table, the column, the count and examples, and the vectorised pre-check agrees with GX."""

from __future__ import annotations

import copy
import json
import random
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.lake import conform
from ingest.quality import SUITES, QualityGate, _ge
from ingest.quality.checks import InRange, InSet, NotNull, PairOrdered, QuantitiesInRange, UniqueKey
from ingest.quality.suites import POD_PHASES
from ingest.schema import TABLES, TS

FIXTURES = Path(__file__).parent / "fixtures" / "quality" / "clean_batches.json"
CLEAN = json.loads(FIXTURES.read_text())


def _pairs(v):
    """JSON has no tuples; map entries are written as [key, value] pairs."""
    if isinstance(v, list) and v and all(isinstance(x, list) and len(x) == 2 for x in v):
        return [tuple(x) for x in v]
    if isinstance(v, list):
        return [_pairs(x) for x in v]
    if isinstance(v, dict):
        return {k: _pairs(x) for k, x in v.items()}
    return v


def batch(table: str, rows: list[dict] | None = None) -> pa.Table:
    """Rows (default: the clean fixture) typed by the landing schema."""
    t = TABLES[table]
    rows = [_pairs(r) for r in (copy.deepcopy(CLEAN[table]) if rows is None else rows)]
    for r in rows:
        for k, v in r.items():
            if isinstance(v, str) and t.schema.field(k).type == TS:
                r[k] = datetime.fromisoformat(v.replace("Z", "+00:00"))
    names = list(dict.fromkeys(k for r in rows for k in r))
    schema = pa.schema([t.schema.field(n) for n in names])
    return conform(t, pa.Table.from_pylist(rows, schema=schema))


def rows_of(table: str) -> list[dict]:
    return copy.deepcopy(CLEAN[table])


@pytest.fixture(scope="module")
def gate() -> QualityGate:
    return QualityGate()


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_landing_table_has_a_suite_and_its_clean_batch_passes(gate, table):
    assert table in SUITES
    report = gate.validate(table, batch(table))
    assert report.success, report.message


def test_brief_example_message_names_table_column_count_and_values(gate):
    rows = rows_of("gpu_samples")
    base = rows[0]
    rows = [dict(base, ts=f"2026-01-01T00:0{i}:00Z", gr_engine_active=v) for i, v in enumerate([0.5, 1.7, 2.0, -0.1, 1.0])]
    report = gate.validate("gpu_samples", batch("gpu_samples", rows))
    assert report.message == "gpu_samples.gr_engine_active: 3 values outside [0, 1], e.g. 1.7, 2.0, -0.1"
    (f,) = report.failures
    assert (f.table, f.column, f.count, f.first_row) == ("gpu_samples", "gr_engine_active", 3, 1)
    assert f.expectation == "expect_column_values_to_be_between" and f.ge_unexpected_count == 3


@pytest.mark.parametrize(
    ("table", "row", "column", "value", "expected"),
    [
        ("gpu_samples", 0, "gpu_util", 100.5, "gpu_samples.gpu_util: 1 value outside [0, 100], e.g. 100.5"),
        ("gpu_samples", 0, "power_w", -5.0, "gpu_samples.power_w: 1 value below 0, e.g. -5.0"),
        ("gpu_samples", 0, "fb_used_mib", -1.0, "gpu_samples.fb_used_mib: 1 value below 0, e.g. -1.0"),
        ("gpu_samples", 0, "gr_engine_active", float("nan"), "gpu_samples.gr_engine_active: 1 value outside [0, 1], e.g. nan"),
        ("container_usage", 1, "cpu_cores", -0.25, "container_usage.cpu_cores: 1 value below 0, e.g. -0.25"),
        ("k8s_nodes", 0, "gpu_count", -8, "k8s_nodes.gpu_count: 1 value below 0, e.g. -8"),
        ("k8s_nodes", 1, "gpu_replicas", 0, "k8s_nodes.gpu_replicas: 1 value below 1, e.g. 0"),
        ("k8s_nodes", 1, "capacity_type", "preemptible", "k8s_nodes.capacity_type: 1 value not in {on_demand, spot, reserved}, e.g. 'preemptible'"),
        ("k8s_pods", 0, "phase", "Runing", "k8s_pods.phase: 1 value not in {Pending, Running, Succeeded, Failed, Unknown}, e.g. 'Runing'"),
        ("prices", 0, "usd_per_hour", 0.0, "prices.usd_per_hour: 1 value not > 0, e.g. 0.0"),
        ("prices", 1, "gpu_usd_per_hour", -0.35, "prices.gpu_usd_per_hour: 1 value not > 0, e.g. -0.35"),
        ("prices", 1, "capacity_type", "Spot", "prices.capacity_type: 1 value not in {on_demand, spot, reserved}, e.g. 'Spot'"),
    ],
)
def test_bad_value_is_rejected_with_its_name(gate, table, row, column, value, expected):
    rows = rows_of(table)
    rows[row][column] = value
    report = gate.validate(table, batch(table, rows))
    assert not report.success
    assert report.message == expected


def test_prices_effective_to_must_be_after_effective_from(gate):
    rows = rows_of("prices")
    rows[1]["effective_to"] = rows[1]["effective_from"]
    report = gate.validate("prices", batch("prices", rows))
    assert report.failures[0].column == "effective_to"
    assert report.message.startswith("prices.effective_to: 1 row where effective_to is not > effective_from, e.g. (effective_from=2025-01-01T00:00:00Z")
    rows[1]["effective_to"] = None  # open-ended is fine
    assert gate.validate("prices", batch("prices", rows)).success


def test_negative_container_request_is_named_with_its_resource(gate):
    rows = rows_of("k8s_pods")
    rows[0]["containers"][0]["requests"][2] = ["nvidia.com/gpu", -1.0]
    rows[1]["init_containers"][0]["requests"][0] = ["cpu", float("nan")]
    report = gate.validate("k8s_pods", batch("k8s_pods", rows))
    by_col = {f.column: f for f in report.failures}
    assert set(by_col) == {"containers.requests", "init_containers.requests"}
    assert by_col["containers.requests"].message == "k8s_pods.containers.requests: 1 row with a quantity below 0 or NaN, e.g. (nvidia.com/gpu=-1.0)"
    assert by_col["containers.requests"].first_row == 0 and by_col["init_containers.requests"].first_row == 1


def test_negative_node_capacity_is_rejected(gate):
    rows = rows_of("k8s_nodes")
    rows[1]["allocatable"][2] = ["nvidia.com/gpu", -4.0]
    report = gate.validate("k8s_nodes", batch("k8s_nodes", rows))
    assert [f.column for f in report.failures] == ["allocatable"]
    assert "nvidia.com/gpu=-4.0" in report.message


@pytest.mark.parametrize(
    ("table", "key_changes"),
    [
        ("k8s_pods", {"namespace": "ml-train", "pod": "bert-0", "uid": "p9"}),
        ("k8s_nodes", {"node": "ip-10-0-1-7"}),
        ("k8s_namespaces", {"namespace": "ml-train"}),
        ("container_usage", {"namespace": "ml-train", "pod": "bert-0", "container": "main"}),
        ("prices", {"instance_type": "p4d.24xlarge", "capacity_type": "on_demand"}),
        ("billing_focus", {"row_hash": "h1"}),
    ],
)
def test_duplicate_key_in_a_snapshot_is_rejected(gate, table, key_changes):
    rows = rows_of(table)
    rows[1].update(key_changes)
    report = gate.validate(table, batch(table, rows))
    (f,) = [f for f in report.failures if f.check == "unique_key"]
    assert f.count == 2 and f.column == "(" + ", ".join(TABLES[table].key) + ")"
    assert "1 duplicated key" in f.message and f.ge_unexpected_count == 2


def test_gpu_sample_keys_with_nulls_compare_as_values(gate):
    rows = rows_of("gpu_samples")
    # Row 2 differs from row 1 only by mig_instance 8 vs 7: distinct. Null vs 7 is distinct too.
    rows[2]["mig_instance"] = None
    assert gate.validate("gpu_samples", batch("gpu_samples", rows)).success
    # Two rows with the same null MIG instance and pod labels are the same series twice.
    rows.append(dict(rows[2], gr_engine_active=0.3))
    report = gate.validate("gpu_samples", batch("gpu_samples", rows))
    assert report.message.startswith("gpu_samples.(ts, hostname, uuid, mig_instance, namespace, pod): 2 rows share a key")
    assert "'ip-10-0-1-7', 'GPU-b', null, null, null)" in report.message


def test_one_bad_row_at_the_end_of_a_large_batch_is_found(gate):
    from testsupport.quality_bench import synthetic_gpu_samples

    n = 200_000
    data = synthetic_gpu_samples(n)
    power = data.column("power_w").to_pylist()
    power[-1] = -1.0
    data = conform(TABLES["gpu_samples"], data.set_column(data.schema.get_field_index("power_w"), "power_w", pa.array(power, pa.float32())))
    report = gate.validate("gpu_samples", data)
    (f,) = report.failures
    assert (f.column, f.count, f.first_row) == ("power_w", 1, n - 1)


def test_duplicates_far_apart_in_a_large_batch_are_found(gate):
    from testsupport.quality_bench import synthetic_gpu_samples

    data = conform(TABLES["gpu_samples"], synthetic_gpu_samples(100_000))
    data = pa.concat_tables([data, data.slice(5, 1)])
    (f,) = gate.validate("gpu_samples", data).failures
    assert (f.check, f.count, f.first_row) == ("unique_key", 2, 5)


def _random_batch(rng: random.Random, n: int) -> pa.Table:
    base = rows_of("gpu_samples")[0]
    rows = []
    for i in range(n):
        r = dict(base, ts=f"2026-01-01T00:{i % 60:02d}:00Z", gpu=rng.choice([0, 1, 2]), pod=rng.choice(["a", "b", None]))
        r["gr_engine_active"] = rng.choice([0.0, 0.5, 1.0, 1.2, -0.3, None])
        r["power_w"] = rng.choice([0.0, 300.0, -1.0, None])
        r["uuid"] = f"GPU-{r['gpu']}"
        rows.append(r)
    return batch("gpu_samples", rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pre_check_and_gx_expectation_agree_on_every_row(seed):
    """GX run over the WHOLE batch finds exactly the rows the vectorised pre-check finds."""
    data = _random_batch(random.Random(seed), 150)
    gxe = _ge.expectations()
    checks = [InRange("gr_engine_active", 0, 1), InRange("power_w", min_value=0), UniqueKey(TABLES["gpu_samples"].key)]
    for check in checks:
        found = check.find(data)
        frame = check.frame(data, pa.array(range(data.num_rows), pa.int64()))
        (outcome,) = _ge.validate_frame(frame, [check.expectation(gxe)], suite_name="agree")
        assert found is not None, check  # the random data breaks every rule
        assert outcome.unexpected_count == found.count, check
        assert sorted(outcome.unexpected_index_list) == found.rows.to_pylist(), check


def test_pair_and_quantity_checks_agree_with_gx():
    gxe = _ge.expectations()
    prices = rows_of("prices")
    prices[0]["effective_to"] = "2024-01-01T00:00:00Z"
    data = batch("prices", prices)
    pods = rows_of("k8s_pods")
    pods[1]["containers"][0]["limits"] = [["memory", -1.0]]
    pods[0]["phase"] = "Evicted"  # a reason, not a phase
    nulls = pa.table({"uid": pa.array(["a", None, "c", None])})
    for check, table in [(PairOrdered("effective_to", "effective_from"), data),
                         (QuantitiesInRange("containers.limits"), batch("k8s_pods", pods)),
                         (InSet("phase", POD_PHASES), batch("k8s_pods", pods)),
                         (NotNull("uid"), nulls)]:
        found = check.find(table)
        (outcome,) = _ge.validate_frame(check.frame(table, pa.array(range(table.num_rows), pa.int64())),
                                        [check.expectation(gxe)], suite_name="agree")
        assert found is not None and outcome.unexpected_count == found.count, check
        assert outcome.unexpected_index_list == found.rows.to_pylist(), check


def test_hash_collisions_alone_never_reject_a_batch(monkeypatch):
    import numpy as np

    from ingest.quality import checks

    monkeypatch.setattr(checks, "_row_hashes", lambda keys: np.zeros(keys.num_rows, np.uint64))  # everything collides
    check = UniqueKey(TABLES["gpu_samples"].key)
    assert check.find(batch("gpu_samples")) is None
    rows = rows_of("gpu_samples")
    rows.append(dict(rows[3]))
    found = check.find(batch("gpu_samples", rows))
    assert found is not None and found.rows.to_pylist() == [3, 4] and found.detail == "1 duplicated key"


GENAI = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "genai"


@pytest.mark.skipif(not (GENAI / "pod_gpu_duty_cycle_anon.csv.gz").exists(), reason="shared traces not present")
def test_the_real_genai_serving_trace_passes_and_one_glitch_is_caught(gate):
    """157 k real per-minute duty cycles (Alibaba GenAI trace) as gpu_samples, then one bad value."""
    import duckdb

    real = duckdb.sql(f"""
        select to_timestamp(1767225600 + timestamp_anon) as ts, 'node-' || (hash(container_ip) % 20) as hostname,
               0 as gpu, 'GPU-' || container_ip as uuid, 'serving' as namespace, container_ip as pod,
               (value / 100)::float as gr_engine_active, value::float as gpu_util
        from read_csv('{GENAI / "pod_gpu_duty_cycle_anon.csv.gz"}')
    """).to_arrow_table()
    data = conform(TABLES["gpu_samples"], real)
    assert data.num_rows > 100_000
    assert gate.validate("gpu_samples", data).success
    util = data.column("gpu_util").to_pylist()
    util[12345] = 250.0  # a counter glitch
    glitched = data.set_column(data.schema.get_field_index("gpu_util"), "gpu_util", pa.array(util, pa.float32()))
    (f,) = gate.validate("gpu_samples", glitched).failures
    assert (f.column, f.count, f.first_row, f.examples) == ("gpu_util", 1, 12345, ["250.0"])


def test_every_suite_exports_as_a_gx_expectation_suite():
    suite = SUITES["gpu_samples"].to_gx()
    assert suite.name == "landing.gpu_samples"
    exported = suite.to_json_dict()["expectations"]
    assert len(exported) == len(SUITES["gpu_samples"].checks)
    ranges = {e["kwargs"]["column"]: (e["kwargs"].get("min_value"), e["kwargs"].get("max_value"))
              for e in exported if e["type"] == "expect_column_values_to_be_between"}
    assert ranges["gr_engine_active"] == (0, 1) and ranges["gpu_util"] == (0, 100)
    assert {e["type"] for e in exported} >= {"expect_column_values_to_not_be_null", "expect_compound_columns_to_be_unique"}
    assert all(len(SUITES[t].to_gx().expectations) == len(SUITES[t].checks) for t in SUITES)
