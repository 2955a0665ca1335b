"""The gate inside the lake writer: ``fail`` aborts the run, ``quarantine`` keeps the rejected batch
and why; either way nothing of the run is committed and the old slice stays."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpufinops.errors import ValidationFailed
from gpufinops.settings import Settings
from ingest.lake import LakeWriter, list_runs, partition_files
from ingest.quality import QualityGate

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def samples(n: int, util: float = 0.5, bad: dict[int, float] | None = None) -> pa.Table:
    bad = bad or {}
    return pa.Table.from_pylist([
        {"ts": T0 + timedelta(minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": bad.get(m, util)}
        for m in range(n)
    ])


def stored(root) -> list[tuple]:
    files = [str(p) for p in partition_files(root, "gpu_samples")]
    return duckdb.sql(f"select round(gr_engine_active::double, 3), count(*) from read_parquet({files!r}) group by 1 order by 1").fetchall() if files else []


def _old(root) -> None:
    LakeWriter(root).write("gpu_samples", samples(10, 0.2), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)


def test_default_policy_fails_the_run_and_keeps_the_old_slice(tmp_path):
    _old(tmp_path)
    w = LakeWriter(tmp_path)
    assert w.quality.on_failure == "fail"
    with pytest.raises(ValidationFailed) as err, w.run("dcgm", "c1", T0, T0 + DAY) as run:
        run.add("k8s_namespaces", [{"snapshot_ts": T0, "namespace": "ok"}])
        run.add("gpu_samples", samples(30, 0.7, bad={3: 1.7, 4: 2.0, 5: -0.1}))
    assert "gpu_samples.gr_engine_active: 3 values outside [0, 1], e.g. 1.7, 2.0, -0.1" in str(err.value)
    assert err.value.report.failures[0].first_row == 3
    assert stored(tmp_path) == [(0.2, 10)]
    assert partition_files(tmp_path, "k8s_namespaces") == []  # the good table of the run is not committed either
    rec = list_runs(tmp_path)[-1]
    assert rec.status == "failed" and "gr_engine_active" in rec.error and rec.quarantine is None
    assert not (tmp_path / "_quarantine").exists()


def test_quarantine_policy_keeps_the_batch_and_the_reason(tmp_path):
    _old(tmp_path)
    w = LakeWriter(tmp_path, quality=Settings(dq_on_failure="quarantine").dq_on_failure)
    with pytest.raises(ValidationFailed), w.run("dcgm", "c1", T0, T0 + DAY) as run:
        run.add("gpu_samples", samples(30, 0.7))
        run.add("gpu_samples", samples(30, 0.7, bad={7: float("nan")}).slice(5))
    rec = list_runs(tmp_path)[-1]
    assert rec.status == "quarantined" and rec.quarantine == f"_quarantine/{rec.run_id}"
    folder = tmp_path / rec.quarantine
    reason = json.loads((folder / "reason.json").read_text())
    assert reason["table"] == "gpu_samples" and reason["rows"] == 25 and reason["source"] == "dcgm"
    (failure,) = reason["failures"]
    assert failure["column"] == "gr_engine_active" and failure["count"] == 1 and failure["examples"] == ["nan"]
    assert failure["first_row"] == 2  # row 7 of the original, 5 sliced off
    kept = pq.read_table(folder / "gpu_samples.parquet")
    assert kept.num_rows == 25
    assert kept.column("dq_failed_checks").to_pylist().count("gr_engine_active") == 1
    assert stored(tmp_path) == [(0.2, 10)]  # nothing of the run, not even its clean first batch


def test_a_run_that_swallows_the_rejection_still_cannot_commit(tmp_path):
    _old(tmp_path)
    w = LakeWriter(tmp_path)
    with pytest.raises(ValidationFailed, match="cannot commit"), w.run("dcgm", "c1", T0, T0 + DAY) as run:
        try:
            run.add("gpu_samples", samples(5, bad={1: -3.0}))
        except ValidationFailed:
            pass
    assert stored(tmp_path) == [(0.2, 10)]
    assert list_runs(tmp_path)[-1].status == "failed"


def test_gate_policies_are_validated_and_a_custom_gate_is_used(tmp_path):
    with pytest.raises(ValueError, match="dq_on_failure"):
        QualityGate("ignore")  # type: ignore[arg-type]
    gate = QualityGate("quarantine", suites={})  # no suites: nothing to check
    w = LakeWriter(tmp_path, quality=gate)
    assert w.quality is gate
    w.write("gpu_samples", samples(3, bad={0: 9.0}), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    assert stored(tmp_path) == [(0.5, 2), (9.0, 1)]


_CLEAN_WRITE = """
import sys
from datetime import UTC, datetime, timedelta
from ingest.lake import LakeWriter
t0 = datetime(2026, 1, 1, tzinfo=UTC)
rows = [{"ts": t0 + timedelta(minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": 0.5} for m in range(100)]
LakeWriter(sys.argv[1]).write("gpu_samples", rows, source="s", cluster="c", window_start=t0, window_end=t0 + timedelta(days=1))
print("great_expectations" in sys.modules)
"""


def test_a_clean_batch_never_imports_great_expectations(tmp_path):
    """The fast path is pure pyarrow; GX (seconds to import) is loaded only to report a failure."""
    import subprocess
    import sys
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", _CLEAN_WRITE, str(tmp_path)], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert stored(tmp_path) == [(0.5, 100)]


def test_check_raises_for_ingesters_that_validate_up_front():
    from ingest.lake import conform
    from ingest.schema import TABLES

    gate = QualityGate()
    data = conform(TABLES["gpu_samples"], samples(4, bad={2: 5.0}))
    with pytest.raises(ValidationFailed, match=r"gpu_samples \(file x.prom\), 4 rows: gpu_samples.gr_engine_active: 1 value outside"):
        gate.check("gpu_samples", data, where="file x.prom")
    assert gate.check("gpu_samples", conform(TABLES["gpu_samples"], samples(4))).success


def test_a_key_repeated_across_overlapping_batches_of_a_run_is_rejected(tmp_path):
    """E.g. two PromQL chunks whose inclusive [start, end] both return the boundary sample."""
    _old(tmp_path)
    w = LakeWriter(tmp_path)
    first = samples(31)  # minutes 0..30
    second = pa.Table.from_pylist([
        {"ts": T0 + timedelta(minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": 0.5}
        for m in range(30, 60)  # minute 30 again
    ])
    with pytest.raises(ValidationFailed) as err, w.run("dcgm", "c1", T0, T0 + DAY) as run:
        run.add("gpu_samples", first)
        run.add("gpu_samples", second)  # each batch alone is clean
    msg = str(err.value)
    assert "(across 2 batches)" in msg
    assert "gpu_samples.(ts, hostname, uuid, mig_instance, namespace, pod): 2 rows share a key (1 duplicated key), e.g. (2026-01-01T00:30:00Z, 'h', 'u', null, null, null)" in msg
    assert stored(tmp_path) == [(0.2, 10)]
    assert list_runs(tmp_path)[-1].status == "failed"


def test_batches_split_by_time_skip_the_cross_batch_scan_and_commit(tmp_path, monkeypatch):
    calls = []
    real = QualityGate.validate_across
    monkeypatch.setattr(QualityGate, "validate_across", lambda self, t, f: calls.append(t) or real(self, t, f))
    w = LakeWriter(tmp_path, quality="quarantine")
    with w.run("dcgm", "c1", T0, T0 + DAY) as run:
        run.add("gpu_samples", samples(30))
        run.add("gpu_samples", pa.Table.from_pylist([
            {"ts": T0 + timedelta(minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": 0.5} for m in range(30, 60)]))
        run.add("k8s_namespaces", [{"snapshot_ts": T0, "namespace": "a"}])
        run.add("k8s_namespaces", [{"snapshot_ts": T0, "namespace": "b"}])  # same snapshot: scanned, and clean
    assert calls == ["k8s_namespaces"]
    assert stored(tmp_path) == [(0.5, 60)] and list_runs(tmp_path)[-1].status == "committed"


def test_cross_batch_duplicates_are_quarantined_with_the_duplicated_rows(tmp_path):
    w = LakeWriter(tmp_path, quality="quarantine")
    with pytest.raises(ValidationFailed), w.run("k8s", "c1", T0, T0 + DAY) as run:
        run.add("k8s_namespaces", [{"snapshot_ts": T0, "namespace": "a"}, {"snapshot_ts": T0, "namespace": "b"}])
        run.add("k8s_namespaces", [{"snapshot_ts": T0, "namespace": "b"}])
    rec = list_runs(tmp_path)[-1]
    assert rec.status == "quarantined"
    kept = pq.read_table(tmp_path / rec.quarantine / "k8s_namespaces.parquet")
    assert kept.column("namespace").to_pylist() == ["b", "b"]
    reason = json.loads((tmp_path / rec.quarantine / "reason.json").read_text())
    assert reason["where"] == "across 2 batches" and reason["failures"][0]["check"] == "unique_key"
