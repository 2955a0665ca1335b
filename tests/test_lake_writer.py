"""The lake writer: idempotent slices, trimming of overlapping windows, rejection of bad rows,
run records, and runs that do not disturb each other."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from gpufinops.errors import SchemaError
from ingest.lake import LakeWriter, list_runs, partition_files, run_is_alive
from ingest.schema import TABLES

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
REPO = Path(__file__).resolve().parents[1]


def samples(start: datetime, minutes: int, *, hosts: tuple[str, ...] = ("h1",), util: float = 0.5) -> pa.Table:
    rows = [
        {"ts": start + timedelta(minutes=m), "hostname": h, "gpu": 0, "uuid": f"GPU-{h}", "gr_engine_active": util}
        for m in range(minutes)
        for h in hosts
    ]
    return pa.Table.from_pylist(rows)


def lake_rows(root: Path, table: str = "gpu_samples", where: str = "true") -> list[tuple]:
    files = [str(p) for p in partition_files(root, table)]
    if not files:
        return []
    sql = f"select cluster, ts, hostname, gr_engine_active from read_parquet({files!r}, hive_partitioning=false) where {where} order by all"
    return duckdb.sql(sql).fetchall()


def test_same_slice_twice_gives_the_same_rows_without_duplicates(tmp_path):
    w = LakeWriter(tmp_path)
    for _ in range(2):
        w.write("gpu_samples", samples(T0, 90), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    rows = lake_rows(tmp_path)
    assert len(rows) == 90 and len(set(rows)) == 90
    assert [r.status for r in list_runs(tmp_path)] == ["committed", "committed"]


def test_rerun_with_fewer_rows_removes_the_old_ones_across_days(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0 + timedelta(hours=23), 120), source="dcgm", cluster="c1",
            window_start=T0, window_end=T0 + 2 * DAY)
    assert len(partition_files(tmp_path, "gpu_samples")) == 2  # the batch spans two days
    w.write("gpu_samples", samples(T0 + timedelta(hours=23), 10), source="dcgm", cluster="c1",
            window_start=T0, window_end=T0 + 2 * DAY)
    assert len(lake_rows(tmp_path)) == 10
    # An empty batch still declares the table: the slice is cleared.
    empty = TABLES["gpu_samples"].schema.empty_table()
    w.write("gpu_samples", empty, source="dcgm", cluster="c1", window_start=T0, window_end=T0 + 2 * DAY)
    assert lake_rows(tmp_path) == []


def test_overlapping_window_of_the_same_source_is_trimmed_not_double_counted(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0, 60, util=0.1), source="prom", cluster="c1",
            window_start=T0, window_end=T0 + timedelta(minutes=60))
    # [30 min, 90 min) overlaps the first window's second half.
    w.write("gpu_samples", samples(T0 + timedelta(minutes=30), 60, util=0.9), source="prom", cluster="c1",
            window_start=T0 + timedelta(minutes=30), window_end=T0 + timedelta(minutes=90))
    rows = lake_rows(tmp_path)
    assert len(rows) == 90 and len({r[1] for r in rows}) == 90
    assert {round(r[3], 3) for r in rows if r[1] < T0 + timedelta(minutes=30)} == {0.1}
    assert {round(r[3], 3) for r in rows if r[1] >= T0 + timedelta(minutes=30)} == {0.9}


def test_other_sources_clusters_and_windows_are_untouched(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0, 30), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    w.write("gpu_samples", samples(T0, 30, hosts=("h2",)), source="file", cluster="c1", window_start=T0, window_end=T0 + DAY)
    w.write("gpu_samples", samples(T0, 30), source="dcgm", cluster="c2", window_start=T0, window_end=T0 + DAY)
    w.write("gpu_samples", samples(T0 + DAY, 30), source="dcgm", cluster="c1", window_start=T0 + DAY, window_end=T0 + 2 * DAY)
    before = lake_rows(tmp_path)
    w.write("gpu_samples", samples(T0, 5, util=0.7), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    after = lake_rows(tmp_path)
    changed = set(before) ^ set(after)
    assert changed and all(r[0] == "c1" and r[2] == "h1" and r[1] < T0 + DAY for r in changed)
    assert len(after) == 30 + 30 + 30 + 5


def test_row_outside_the_window_is_rejected_naming_the_row_and_nothing_is_written(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0, 3), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    with pytest.raises(SchemaError, match=r"gpu_samples: row 2 has ts=2026-01-02 00:00:00\+00:00 outside the run window"):
        w.write("gpu_samples", samples(T0 + DAY - timedelta(minutes=2), 3), source="dcgm", cluster="c1",
                window_start=T0, window_end=T0 + DAY)
    assert len(lake_rows(tmp_path)) == 3
    assert list_runs(tmp_path)[-1].status == "failed" and "row 2" in list_runs(tmp_path)[-1].error


def test_bad_type_is_rejected_naming_the_column(tmp_path):
    bad = samples(T0, 2).set_column(4, "gr_engine_active", pa.array(["0.5", "busy"]))
    with pytest.raises(SchemaError, match=r"gpu_samples: column 'gr_engine_active' cannot be read as float"):
        LakeWriter(tmp_path).write("gpu_samples", bad, source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    assert lake_rows(tmp_path) == []


def test_run_records_hold_status_rows_and_error(tmp_path):
    w = LakeWriter(tmp_path)
    with w.run("k8s", "c1", T0, T0 + DAY) as run:
        run.add("gpu_samples", samples(T0, 4))
        run.add("gpu_samples", samples(T0 + timedelta(hours=1), 3))
        run.add("k8s_namespaces", [{"snapshot_ts": T0, "namespace": "a"}, {"snapshot_ts": T0, "namespace": "b"}])
    with pytest.raises(RuntimeError), w.run("k8s", "c1", T0, T0 + DAY) as run:
        run.add("k8s_namespaces", [{"snapshot_ts": T0, "namespace": "a"}])
        raise RuntimeError("source went away")
    ok, failed = list_runs(tmp_path)
    assert (ok.status, ok.rows, ok.error) == ("committed", {"gpu_samples": 7, "k8s_namespaces": 2}, None)
    assert failed.status == "failed" and failed.error == "RuntimeError: source went away"
    assert failed.finished_at is not None and failed.rows == {"k8s_namespaces": 1}
    ns = duckdb.sql(f"select count(*) from read_parquet({[str(p) for p in partition_files(tmp_path, 'k8s_namespaces')]!r})").fetchall()[0]
    assert ns == (2,)


def test_opening_the_lake_does_not_clean_up_a_live_run(tmp_path):
    """Regression: recovery used to delete every staging folder, including another writer's live run."""
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0, 10), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    with w.run("dcgm", "c1", T0, T0 + DAY) as run:
        run.add("gpu_samples", samples(T0, 20))
        assert run_is_alive(tmp_path, run.run_id)
        LakeWriter(tmp_path)  # another writer opens the lake meanwhile (e.g. a CronJob)
        assert run.stage.exists()
    assert len(lake_rows(tmp_path)) == 20
    assert not run_is_alive(tmp_path, run.run_id)
    assert list_runs(tmp_path)[-1].status == "committed"


_HOLD_LOCK = """
import sys
from ingest.lake import LakeWriter
w = LakeWriter(sys.argv[1])
with w._lock():
    print("LOCKED", flush=True)
    sys.stdin.readline()
"""


def test_concurrent_writers_serialise_on_the_lake_lock(tmp_path):
    w = LakeWriter(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(tmp_path)], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "LOCKED"
        done = threading.Event()

        def write():
            w.write("gpu_samples", samples(T0, 5), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
            done.set()

        t = threading.Thread(target=write)
        t.start()
        assert not done.wait(1.0)  # blocked on the other process's lock ...
        assert lake_rows(tmp_path) == [] and not any(r.status == "committed" for r in list_runs(tmp_path))
        holder.stdin.write("\n")
        holder.stdin.flush()
        t.join(30)
        assert done.is_set()  # ... and committed once it was released
    finally:
        holder.kill()
        holder.wait()
    assert len(lake_rows(tmp_path)) == 5 and list_runs(tmp_path)[-1].status == "committed"


_PARALLEL = """
import sys
from datetime import UTC, datetime, timedelta
import pyarrow as pa
from ingest.lake import LakeWriter
root, cluster = sys.argv[1], sys.argv[2]
t0 = datetime(2026, 1, 1, tzinfo=UTC)
for i in range(5):
    rows = [{"ts": t0 + timedelta(minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": 0.1 * i}
            for m in range(200)]
    LakeWriter(root).write("gpu_samples", pa.Table.from_pylist(rows), source="dcgm", cluster=cluster,
                           window_start=t0, window_end=t0 + timedelta(days=1))
"""


def test_parallel_writers_in_processes_all_commit(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", _PARALLEL, str(tmp_path), f"c{i}"], cwd=REPO) for i in range(3)]
    assert [p.wait(120) for p in procs] == [0, 0, 0]
    runs = list_runs(tmp_path)
    assert len(runs) == 15 and {r.status for r in runs} == {"committed"}
    rows = lake_rows(tmp_path)
    assert len(rows) == 3 * 200 and {round(r[3], 3) for r in rows} == {0.4}
    assert not any((tmp_path / "_staging").iterdir())
