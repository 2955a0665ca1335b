"""The lake's hourly rollups (ingest/rollups.py, macros/rollups.sql): written with every raw file,
kept in step through re-runs, trims and clears, back-filled for a lake that has none, rewritten when
the rollup SQL changes, and equal to the statistics of the raw samples they stand for."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from ingest import rollups
from ingest.lake import LakeWriter, partition_files
from ingest.schema import TABLES

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def samples(start: datetime, minutes: int, *, util=lambda m: 0.5, pod: str = "p") -> pa.Table:
    rows = [{"ts": start + timedelta(minutes=m), "hostname": "h1", "gpu": 0, "uuid": "GPU-1",
             "gr_engine_active": util(m), "fb_used_mib": 1000.0 + 10 * m, "fb_free_mib": 39000.0,
             "namespace": "ns", "pod": pod} for m in range(minutes)]
    return pa.Table.from_pylist(rows)


def _raw_stats(root: Path) -> list[tuple]:
    files = [str(p) for p in partition_files(root, "gpu_samples")]
    if not files:
        return []
    return duckdb.sql(
        f"select date_trunc('hour', ts at time zone 'UTC') h, count(*), round(avg(gr_engine_active), 9), "
        f"max(fb_used_mib) from read_parquet({files!r}) group by h order by h").fetchall()


def _rollup_stats(root: Path) -> list[tuple]:
    files = [str(p) for p in partition_files(root, "gpu_samples_hourly")]
    if not files:
        return []
    return duckdb.sql(
        f"select hour, sum(samples)::bigint, round(sum(util_sum) / sum(samples), 9), max(fb_used_max_mib) "
        f"from read_parquet({files!r}) group by hour order by hour").fetchall()


def _twins_match(root: Path) -> None:
    raw = [p.relative_to(root / "gpu_samples") for p in partition_files(root, "gpu_samples")]
    twins = [p.relative_to(root / "gpu_samples_hourly") for p in partition_files(root, "gpu_samples_hourly")]
    assert raw == twins


def test_every_raw_file_gets_its_rollup_with_the_samples_statistics(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0 + timedelta(hours=22), 180, util=lambda m: (m % 7) / 10),
            source="dcgm", cluster="c1", window_start=T0, window_end=T0 + 2 * DAY)
    _twins_match(tmp_path)
    assert len(partition_files(tmp_path, "gpu_samples_hourly")) == 2  # the batch spans two days
    assert _rollup_stats(tmp_path) == _raw_stats(tmp_path)
    assert [r[1] for r in _rollup_stats(tmp_path)] == [60, 60, 60]
    assert json.loads((tmp_path / rollups.SPEC_FILE).read_text())["digest"] == rollups.spec_digest()


def test_the_histograms_count_every_sample_in_its_bucket(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0, 60, util=lambda m: 0.25 if m < 45 else 1.0), source="dcgm", cluster="c1",
            window_start=T0, window_end=T0 + DAY)
    files = [str(p) for p in partition_files(tmp_path, "gpu_samples_hourly")]
    (hist, fb_hist, umax), = duckdb.sql(f"select util_hist, fb_hist, util_max from read_parquet({files!r})").fetchall()
    # 0.25 -> bucket 50 of 200, 1.0 -> bucket 200 (macros/formulas.sql util_bucket)
    assert hist == [{"b": 50, "n": 45}, {"b": 200, "n": 15}] and umax == 1.0
    assert sum(e["n"] for e in fb_hist) == 60 and fb_hist[0]["b"] == 1000 // 256


def test_reruns_trims_and_clears_keep_the_rollups_in_step(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0, 120, util=lambda m: 0.1), source="prom", cluster="c1",
            window_start=T0, window_end=T0 + timedelta(hours=2))
    # an overlapping window trims the first file: its rollup is recomputed from the rows it keeps
    w.write("gpu_samples", samples(T0 + timedelta(minutes=90), 60, util=lambda m: 0.9), source="prom", cluster="c1",
            window_start=T0 + timedelta(minutes=90), window_end=T0 + timedelta(minutes=150))
    _twins_match(tmp_path)
    assert _rollup_stats(tmp_path) == _raw_stats(tmp_path)
    assert [r[1] for r in _rollup_stats(tmp_path)] == [60, 60, 30]
    # the same slice again replaces it; an empty batch clears it, rollup included
    w.write("gpu_samples", samples(T0 + timedelta(minutes=90), 60, util=lambda m: 0.9), source="prom", cluster="c1",
            window_start=T0 + timedelta(minutes=90), window_end=T0 + timedelta(minutes=150))
    assert _rollup_stats(tmp_path) == _raw_stats(tmp_path)
    empty = TABLES["gpu_samples"].schema.empty_table()
    for start, end in ((T0, T0 + timedelta(hours=2)), (T0 + timedelta(minutes=90), T0 + timedelta(minutes=150))):
        w.write("gpu_samples", empty, source="prom", cluster="c1", window_start=start, window_end=end)
    assert partition_files(tmp_path, "gpu_samples") == [] and partition_files(tmp_path, "gpu_samples_hourly") == []


def test_a_lake_without_rollups_is_back_filled_and_a_second_pass_does_nothing(tmp_path):
    w = LakeWriter(tmp_path)
    for d in range(3):
        w.write("gpu_samples", samples(T0 + d * DAY, 90), source="dcgm", cluster="c1",
                window_start=T0 + d * DAY, window_end=T0 + (d + 1) * DAY)
    want = _rollup_stats(tmp_path)
    for p in partition_files(tmp_path, "gpu_samples_hourly"):
        p.unlink()
    (tmp_path / rollups.SPEC_FILE).unlink()
    # a lake with raw files and no rollup record: writers leave rollups to the build's back-fill
    w.write("gpu_samples", samples(T0 + 3 * DAY, 30), source="dcgm", cluster="c1",
            window_start=T0 + 3 * DAY, window_end=T0 + 4 * DAY)
    assert partition_files(tmp_path, "gpu_samples_hourly") == []
    seen: list[tuple[int, int]] = []
    assert w.ensure_rollups(lambda i, n: seen.append((i, n))) == {"written": 4, "removed": 0}
    assert seen[-1] == (4, 4)
    _twins_match(tmp_path)
    assert _rollup_stats(tmp_path)[:len(want)] == want
    assert w.ensure_rollups() == {"written": 0, "removed": 0}
    # from now on the writer writes them itself
    w.write("gpu_samples", samples(T0 + 4 * DAY, 30), source="dcgm", cluster="c1",
            window_start=T0 + 4 * DAY, window_end=T0 + 5 * DAY)
    _twins_match(tmp_path)


def test_rollups_made_with_other_sql_are_rewritten_and_orphans_removed(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0, 90), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    rollups.write_lake_digest(tmp_path, {t: "not-this-sql" for t in rollups.ROLLUPS})
    orphan = tmp_path / "gpu_samples_hourly" / "cluster=c1" / "day=2025-12-31" / "gone__x.parquet"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"")
    # a writer does not mix its rollups into a lake made with other SQL
    w.write("gpu_samples", samples(T0 + DAY, 30), source="dcgm", cluster="c1",
            window_start=T0 + DAY, window_end=T0 + 2 * DAY)
    assert len(partition_files(tmp_path, "gpu_samples_hourly")) == 2  # the old one and the orphan
    assert w.ensure_rollups() == {"written": 2, "removed": 2}
    _twins_match(tmp_path)
    assert _rollup_stats(tmp_path) == _raw_stats(tmp_path)
    assert rollups.lake_digest(tmp_path) == rollups.spec_digest()


def test_a_broken_rollup_record_is_a_clear_error(tmp_path):
    (tmp_path / rollups.SPEC_FILE).write_text("[1, 2")
    with pytest.raises(Exception, match=r"_rollups.json: not a rollup record"):
        rollups.lake_digest(tmp_path)


def test_the_rollup_sql_is_the_projects_formulas(tmp_path):
    """Rendered from macros/formulas.sql with dbt_project.yml's vars: the clamp and the buckets."""
    sql = rollups.rollup_sql("gpu_samples")
    assert "greatest(0.0, least(1.0, coalesce(cast(gr_engine_active as double), cast(gpu_util as double) / 100.0)))" in sql
    assert "* 200) as smallint)" in sql  # util_histogram_buckets
    assert "ln(1.05)" in rollups.rollup_sql("container_usage")  # vpa_histogram_ratio


def pod_snapshots(rows: list[tuple[datetime, str, str]]) -> pa.Table:
    """(snapshot time, pod uid, a label value) -> k8s_pods rows."""
    schema = pa.schema([("snapshot_ts", pa.timestamp("us", tz="UTC")), ("namespace", pa.string()), ("pod", pa.string()),
                        ("uid", pa.string()), ("node", pa.string()), ("phase", pa.string()),
                        ("labels", pa.map_(pa.string(), pa.string()))])
    return pa.Table.from_pylist([
        {"snapshot_ts": ts, "namespace": "ns", "pod": f"pod-{uid}", "uid": uid, "node": "n1", "phase": "Running",
         "labels": [("team", team)]} for ts, uid, team in rows], schema=schema)


def _selected_rows(root: Path, table: str, columns: str) -> list[tuple]:
    """A row-selecting rollup's rows: (day= of its file, *columns), sorted."""
    files = [str(p) for p in partition_files(root, table)]
    return duckdb.sql(f"select regexp_extract(filename, 'day=([0-9-]+)', 1), {columns} "
                      f"from read_parquet({files!r}, filename = true) order by all").fetchall()


def _pods_last(root: Path) -> list[tuple]:
    return _selected_rows(root, "k8s_pods_last", "uid, snapshot_ts at time zone 'UTC', labels['team']")


def test_the_pod_rollup_keeps_each_pods_last_snapshot_rows_per_file(tmp_path):
    w = LakeWriter(tmp_path)
    t = T0 + timedelta(hours=23)
    w.write("k8s_pods", pod_snapshots([(t, "a", "x"), (t, "b", "x"), (t + timedelta(minutes=5), "a", "y"),
                                       (t + timedelta(minutes=65), "a", "z")]),
            source="k8s", cluster="c1", window_start=T0, window_end=T0 + 2 * DAY)
    naive = t.replace(tzinfo=None)
    # one file per day: pod a's last rows of each day (the label it had then), pod b's only snapshot
    assert _pods_last(tmp_path) == [
        ("2026-01-01", "a", naive + timedelta(minutes=5), "y"),
        ("2026-01-01", "b", naive, "x"),
        ("2026-01-02", "a", naive + timedelta(minutes=65), "z"),
    ]


def test_the_pod_runs_rollup_keeps_each_run_of_consecutive_snapshots_per_hour(tmp_path):
    """Pod a is in the file's snapshots 10:00, 10:05, 10:15 and 11:00 (not 10:10, which pod b alone
    is in), and Succeeded at 10:20: three runs (10:00-10:05, 10:15, and 11:00 in the next clock hour).
    The snapshot list of the file holds every snapshot time once, pod b's 10:10 included."""
    w = LakeWriter(tmp_path)
    t = T0 + timedelta(hours=10)
    m = timedelta(minutes=1)
    rows = [(t, "a", "Running"), (t + 5 * m, "a", "Running"), (t + 10 * m, "b", "Pending"),
            (t + 15 * m, "a", "Running"), (t + 20 * m, "a", "Succeeded"), (t + 60 * m, "a", "Running")]
    table = pod_snapshots([(ts, uid, "x") for ts, uid, _ in rows])
    table = table.set_column(table.schema.get_field_index("phase"), "phase", pa.array([p for *_, p in rows]))
    w.write("k8s_pods", table, source="k8s", cluster="c1", window_start=T0, window_end=T0 + DAY)
    naive = t.replace(tzinfo=None)
    runs = _selected_rows(tmp_path, "k8s_pod_runs", "pod_uid, hour, first_ts, last_ts, snapshots, phase")
    assert runs == [
        ("2026-01-01", "a", naive, naive, naive + 5 * m, 2, "Running"),
        ("2026-01-01", "a", naive, naive + 15 * m, naive + 15 * m, 1, "Running"),
        ("2026-01-01", "a", naive + 60 * m, naive + 60 * m, naive + 60 * m, 1, "Running"),
        ("2026-01-01", "b", naive, naive + 10 * m, naive + 10 * m, 1, "Pending"),
    ]
    times = _selected_rows(tmp_path, "k8s_pod_snapshots", "snapshot_ts")
    assert times == [("2026-01-01", naive + k * m) for k in (0, 5, 10, 15, 20, 60)]


def node_snapshots(rows: list[tuple[datetime, str, str, str]]) -> pa.Table:
    """(snapshot time, node name, node uid, a label value) -> k8s_nodes rows."""
    schema = pa.schema([("snapshot_ts", pa.timestamp("us", tz="UTC")), ("node", pa.string()), ("uid", pa.string()),
                        ("labels", pa.map_(pa.string(), pa.string()))])
    return pa.Table.from_pylist([{"snapshot_ts": ts, "node": node, "uid": uid, "labels": [("pool", pool)]}
                                 for ts, node, uid, pool in rows], schema=schema)


def _nodes_last(root: Path) -> list[tuple]:
    return _selected_rows(root, "k8s_nodes_last", "node, uid, snapshot_ts at time zone 'UTC', labels['pool']")


def test_the_node_rollup_keeps_each_nodes_last_snapshot_rows_per_hour_and_file(tmp_path):
    w = LakeWriter(tmp_path)
    t = T0 + timedelta(hours=22)
    m = timedelta(minutes=1)
    w.write("k8s_nodes", node_snapshots([
        (t, "n1", "u1", "x"), (t + 5 * m, "n1", "u1", "y"),  # hour 22: the 22:05 row
        (t + 55 * m, "n2", "u2", "x"),  # n2's only snapshot of hour 22
        (t + 60 * m, "n1", "u1", "z"),  # hour 23
        (t + 62 * m, "n2", "u2", "x"), (t + 65 * m, "n2", "u3", "w"),  # n2 replaced (a new UID): the last
        (t + 125 * m, "n1", "u1", "v"),  # the next day's file
    ]), source="k8s", cluster="c1", window_start=T0, window_end=T0 + 2 * DAY)
    naive = t.replace(tzinfo=None)
    assert _nodes_last(tmp_path) == [
        ("2026-01-01", "n1", "u1", naive + 5 * m, "y"),
        ("2026-01-01", "n1", "u1", naive + 60 * m, "z"),
        ("2026-01-01", "n2", "u2", naive + 55 * m, "x"),
        ("2026-01-01", "n2", "u3", naive + 65 * m, "w"),
        ("2026-01-02", "n1", "u1", naive + 125 * m, "v"),
    ]


def test_a_new_rollup_is_back_filled_without_rewriting_the_others(tmp_path):
    w = LakeWriter(tmp_path)
    w.write("gpu_samples", samples(T0, 90), source="dcgm", cluster="c1", window_start=T0, window_end=T0 + DAY)
    w.write("k8s_pods", pod_snapshots([(T0, "a", "x")]), source="k8s", cluster="c1",
            window_start=T0, window_end=T0 + DAY)
    assert rollups.lake_digests(tmp_path) == rollups.table_digests()
    # the record an older version wrote: one digest over its three rollups' SQL, no pod rollup yet
    legacy = json.dumps({t: rollups.rollup_sql(t) for t in ("gpu_samples", "container_usage", "serving_requests")},
                        sort_keys=True)
    (tmp_path / rollups.SPEC_FILE).write_text(json.dumps({"digest": hashlib.sha256(legacy.encode()).hexdigest()[:16]}))
    pod_rollups = [r.table for r in rollups.ROLLUPS["k8s_pods"]]
    assert pod_rollups == ["k8s_pods_last", "k8s_pod_runs", "k8s_pod_snapshots"]
    for t in pod_rollups:
        for p in partition_files(tmp_path, t):
            p.unlink()
    kept = {p: p.stat().st_mtime_ns for p in partition_files(tmp_path, "gpu_samples_hourly")}
    # a writer meanwhile stages no pod rollup (the lake has pod files without one) ...
    w.write("k8s_pods", pod_snapshots([(T0 + DAY, "a", "x")]), source="k8s", cluster="c1",
            window_start=T0 + DAY, window_end=T0 + 2 * DAY)
    assert [partition_files(tmp_path, t) for t in pod_rollups] == [[], [], []]
    # ... and the back-fill writes only the pod rollups (all three of each file): the DCGM ones are
    # current and stay as they are
    assert w.ensure_rollups() == {"written": 6, "removed": 0}
    assert {p: p.stat().st_mtime_ns for p in partition_files(tmp_path, "gpu_samples_hourly")} == kept
    assert rollups.lake_digests(tmp_path) == rollups.table_digests()
    assert [r[1] for r in _pods_last(tmp_path)] == ["a", "a"]
    # a legacy record of other SQL stands for no rollup: all of them are rewritten
    (tmp_path / rollups.SPEC_FILE).write_text(json.dumps({"digest": "0123456789abcdef"}))
    assert w.ensure_rollups() == {"written": 7, "removed": 7}
