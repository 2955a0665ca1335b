"""A writer SIGKILLed mid-run: before the commit point nothing changes; after it the next writer
rolls the plan forward to the full new slice. Never a partial slice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa

from ingest.lake import LakeWriter, list_runs, partition_files

T0 = datetime(2026, 1, 1, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[1]

# The child stages three days of samples (util 0.9) over a lake holding the same slice at util 0.1,
# then either waits to be killed before commit, or is killed by a hook after the first rename of
# the plan (the plan file exists; some files are moved, others not).
_CHILD = """
import os, signal, sys
from datetime import UTC, datetime, timedelta
import pyarrow as pa
import ingest.lake as lake

root, mode = sys.argv[1], sys.argv[2]
t0 = datetime(2026, 1, 1, tzinfo=UTC)

def batch(day, util):
    return pa.Table.from_pylist([
        {"ts": t0 + timedelta(days=day, minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": util}
        for m in range(50)])

if mode == "during_plan":
    real_replace = os.replace
    moved = []
    def replace_then_die(src, dst):
        real_replace(src, dst)
        if str(dst).endswith(".parquet"):
            moved.append(dst)
            if len(moved) == 1:
                os.kill(os.getpid(), signal.SIGKILL)
    lake.os.replace = replace_then_die

w = lake.LakeWriter(root)
with w.run("dcgm", "c1", t0, t0 + timedelta(days=3)) as run:
    for day in range(3):
        run.add("gpu_samples", batch(day, 0.9))
    run.add("k8s_namespaces", [{"snapshot_ts": t0, "namespace": "new"}])
    print("STAGED", flush=True)
    if mode == "before_commit":
        sys.stdin.readline()  # killed here
print("COMMITTED", flush=True)
"""


def _old_slice(root: Path) -> None:
    w = LakeWriter(root)
    with w.run("dcgm", "c1", T0, T0 + timedelta(days=3)) as run:
        for day in range(3):
            run.add("gpu_samples", pa.Table.from_pylist([
                {"ts": T0 + timedelta(days=day, minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": 0.1}
                for m in range(80)]))
        run.add("k8s_namespaces", [{"snapshot_ts": T0, "namespace": "old"}])


def _lake(root: Path, settled: bool = True) -> tuple[list[tuple], list[tuple]]:
    samples = [str(p) for p in partition_files(root, "gpu_samples")]
    ns = [str(p) for p in partition_files(root, "k8s_namespaces")]
    s = duckdb.sql(f"select round(gr_engine_active::double, 3) u, count(*) from read_parquet({samples!r}) group by u order by u").fetchall()
    # the hourly rollups move with the raw files: one per raw file, with the same rows counted
    twins = [str(p) for p in partition_files(root, "gpu_samples_hourly")]
    if not settled:  # half-way through a plan: the rollups may not match yet
        return s, duckdb.sql(f"select namespace from read_parquet({ns!r}) order by 1").fetchall()
    assert [t.replace("gpu_samples_hourly/", "gpu_samples/") for t in twins] == samples
    if samples:
        raw_n = duckdb.sql(f"select count(*) from read_parquet({samples!r})").fetchall()[0][0]
        assert duckdb.sql(f"select sum(samples) from read_parquet({twins!r})").fetchall()[0][0] == raw_n
    n = duckdb.sql(f"select namespace from read_parquet({ns!r}) order by 1").fetchall()
    return s, n


def _run_child(root: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(root), mode], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_kill_before_commit_leaves_the_old_slice_intact_and_no_staging(tmp_path):
    _old_slice(tmp_path)
    before = _lake(tmp_path)
    child = _run_child(tmp_path, "before_commit")
    assert child.stdout.readline().strip() == "STAGED"
    staged = [p for p in (tmp_path / "_staging").rglob("*.parquet") if "_hourly" not in str(p)]
    assert len(staged) == 4  # three days of samples and the namespaces, all aside
    assert len(list((tmp_path / "_staging").rglob("gpu_samples_hourly/*/*/*.parquet"))) == 3  # and their rollups
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(30) == -signal.SIGKILL
    assert _lake(tmp_path) == before == ([(0.1, 240)], [("old",)])
    LakeWriter(tmp_path)  # the next writer cleans up
    assert _lake(tmp_path) == before
    assert not any((tmp_path / "_staging").iterdir())
    killed = list_runs(tmp_path)[-1]
    assert killed.status == "failed" and "interrupted before commit" in killed.error


def test_kill_during_the_plan_is_rolled_forward_to_the_full_new_slice(tmp_path):
    _old_slice(tmp_path)
    child = _run_child(tmp_path, "during_plan")
    out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL and "COMMITTED" not in out
    plan = list((tmp_path / "_staging").glob("*/COMMIT.json"))
    assert len(plan) == 1  # killed after the commit point
    half = _lake(tmp_path, settled=False)
    assert half[0] != [(0.9, 150)]  # the kill really left the lake half-way
    LakeWriter(tmp_path)  # recovery executes the rest of the plan
    assert _lake(tmp_path) == ([(0.9, 150)], [("new",)])
    assert not any((tmp_path / "_staging").iterdir())
    rolled = list_runs(tmp_path)[-1]
    assert rolled.status == "committed" and rolled.error is None


def test_a_commit_after_a_crash_rolls_the_dead_plan_forward_first(tmp_path):
    """The dead run's plan must run before a later commit, or it could delete the later run's files."""
    _old_slice(tmp_path)
    w = LakeWriter(tmp_path)  # opened before the crash: its own recovery has already run
    child = _run_child(tmp_path, "during_plan")
    child.communicate(timeout=60)
    assert list((tmp_path / "_staging").glob("*/COMMIT.json"))
    rows = [{"ts": T0 + timedelta(minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": 0.5} for m in range(7)]
    w.write("gpu_samples", pa.Table.from_pylist(rows), source="dcgm", cluster="c1",
            window_start=T0, window_end=T0 + timedelta(days=1))
    # Day 1 now holds the later run's 7 rows; days 2-3 the crashed run's rolled-forward rows.
    assert _lake(tmp_path) == ([(0.5, 7), (0.9, 100)], [("new",)])
    assert {r.status for r in list_runs(tmp_path)} == {"committed"}


def _three_days(util: float) -> list[pa.Table]:
    return [pa.Table.from_pylist([
        {"ts": T0 + timedelta(days=d, minutes=m), "hostname": "h", "gpu": 0, "uuid": "u", "gr_engine_active": util}
        for m in range(50)]) for d in range(3)]


def test_an_error_after_the_commit_point_is_rolled_forward_even_in_the_same_process(tmp_path, monkeypatch):
    import ingest.lake as lake

    _old_slice(tmp_path)
    real = lake._execute_plan

    def fail_halfway(root, plan):
        real(root, {"moves": plan["moves"][:1], "deletes": []})
        raise OSError("disk went away")

    monkeypatch.setattr(lake, "_execute_plan", fail_halfway)
    w = LakeWriter(tmp_path)
    try:
        with w.run("dcgm", "c1", T0, T0 + timedelta(days=3)) as run:
            for t in _three_days(0.9):
                run.add("gpu_samples", t)
            run.add("k8s_namespaces", [{"snapshot_ts": T0, "namespace": "new"}])
    except OSError:
        pass
    else:
        raise AssertionError("the commit should have failed")
    assert list_runs(tmp_path)[-1].status == "running"  # not final yet: the plan stands
    monkeypatch.setattr(lake, "_execute_plan", real)
    LakeWriter(tmp_path)  # same process: the failed run's stage must not look alive
    assert _lake(tmp_path) == ([(0.9, 150)], [("new",)])
    assert list_runs(tmp_path)[-1].status == "committed"


def test_an_error_before_the_commit_point_fails_the_run_and_keeps_the_old_slice(tmp_path, monkeypatch):
    from ingest.lake import LakeRun

    _old_slice(tmp_path)
    before = _lake(tmp_path)

    def broken_plan(self):
        raise OSError("cannot read an old file")

    monkeypatch.setattr(LakeRun, "_plan", broken_plan)
    w = LakeWriter(tmp_path)
    try:
        with w.run("dcgm", "c1", T0, T0 + timedelta(days=3)) as run:
            run.add("gpu_samples", _three_days(0.9)[0])
    except OSError:
        pass
    rec = list_runs(tmp_path)[-1]
    assert rec.status == "failed" and "cannot read an old file" in rec.error
    assert _lake(tmp_path) == before and not any((tmp_path / "_staging").iterdir())
