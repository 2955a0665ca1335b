"""The incremental build gives the numbers a full build gives (DESIGN §6: the hourly build only
rebuilds what the new data touches).

A lake of 14 hours (2026-11-02 10:00 .. 24:00) is built in full; then two more hours land across
midnight (with three extra pods) together with a cluster whose data is a day older, and the
warehouse is built incrementally. A fresh full build of the same lake must hold the same rows in
every table the build writes (marts, dq, the incremental intermediates), to 1e-9 relative.
"""

from __future__ import annotations

import csv
import importlib.util
import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from gpufinops.settings import Settings
from testsupport.warehouse_compare import assert_same_tables

_FIXTURE = Path(__file__).parent / "fixtures" / "warehouse" / "small_lake.py"
_spec = importlib.util.spec_from_file_location("warehouse_small_lake_incremental", _FIXTURE)
lake = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(lake)

pytestmark = pytest.mark.timeout(600)
def _serving_series(t0_h: int, t1_h: int) -> list[dict]:
    """Cumulative request/token counters of three serving series in hours [t0_h, t1_h) after T0:
    serve-b every 5 min (+10 a sample, reset to 3 at T0+15h), serve-gap every 10 min until T0+9h and
    again from T0+15h (a gap across the incremental cutoff, longer than the lookback), and new-x (no
    model label, no generation counter) only from T0+14h."""
    rows = []
    for m in range(t0_h * 60, t1_h * 60, 5):
        t = lake.T0 + timedelta(minutes=m)
        n = m // 5
        reqs = 10.0 * n if m < 15 * 60 else 3.0 + 10.0 * (n - 15 * 12)
        rows.append({"ts": t, "namespace": "ann", "pod": "serve-b", "model": "m1", "requests_total": reqs,
                     "prompt_tokens_total": 100 * reqs, "generation_tokens_total": 7 * reqs})
        if m % 10 == 0 and (m < 9 * 60 or m >= 15 * 60):
            rows.append({"ts": t, "namespace": "ann", "pod": "serve-gap", "model": "m1", "requests_total": 2.0 * m,
                         "prompt_tokens_total": 20.0 * m, "generation_tokens_total": 5.0 * m})
        if m >= 14 * 60 and m % 15 == 0:
            rows.append({"ts": t, "namespace": "ml", "pod": "new-x", "model": None, "requests_total": float(m),
                         "prompt_tokens_total": float(m), "generation_tokens_total": None})
    return rows


def _write_serving(lake_dir: Path, t0_h: int, t1_h: int) -> None:
    from ingest.lake import LakeWriter

    LakeWriter(lake_dir).write("serving_requests", _serving_series(t0_h, t1_h), source="test_serving",
                               cluster=lake.CLUSTER, window_start=lake.T0 + timedelta(hours=t0_h),
                               window_end=lake.T0 + timedelta(hours=t1_h))


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    from transform import run_build

    inc = Settings(home=tmp_path_factory.mktemp("inc"))
    lake.write_small_lake(inc.lake_dir, start=lake.T0, hours=2)
    lake.write_small_lake(inc.lake_dir, start=lake.T0 + timedelta(hours=2), hours=12)
    _write_serving(inc.lake_dir, 0, 14)
    run_build(inc, full_refresh=True)
    extra = [(lake._pod("ml", f"late-{i}", "ts", {"cpu": 1.0, "memory": 1.0 * lake.GIB, "nvidia.com/gpu": 1.0}), 2)
             for i in range(3)]
    lake.write_small_lake(inc.lake_dir, start=lake.T0 + timedelta(hours=14), hours=2, extra_pods=extra)
    lake.write_small_lake(inc.lake_dir, start=lake.T0 - timedelta(days=1), hours=1, cluster="c2")
    _write_serving(inc.lake_dir, 14, 16)
    incremental = run_build(inc)

    full = Settings(home=tmp_path_factory.mktemp("full"))
    shutil.copytree(inc.lake_dir, full.lake_dir)
    run_build(full, full_refresh=True)
    return inc, incremental, full


def _write_late_serving(lake_dir: Path) -> None:
    """A back-fill from another source: series late-s over T0+2h .. T0+4h, far older than the lookback
    (a counter that resets at T0+3h)."""
    from ingest.lake import LakeWriter

    rows = [{"ts": lake.T0 + timedelta(minutes=m), "namespace": "ann", "pod": "serve-b", "model": "late-s",
             "requests_total": float(m % 60 if m >= 180 else m), "prompt_tokens_total": 2.0 * m,
             "generation_tokens_total": None} for m in range(120, 240, 10)]
    LakeWriter(lake_dir).write("serving_requests", rows, source="late_backfill", cluster=lake.CLUSTER,
                               window_start=lake.T0 + timedelta(hours=2), window_end=lake.T0 + timedelta(hours=4))


@pytest.fixture(scope="module")
def second(builds, tmp_path_factory):
    """A second incremental build on a copy of the first, after two more hours of c1 and one of c2:
    now every cluster of the lake has rows in the marts, so the window gets its constant bound
    (macro incremental_since)."""
    from transform import run_build

    inc, _, _ = builds
    home = tmp_path_factory.mktemp("again") / "home"
    shutil.copytree(inc.home, home, symlinks=True)
    again = Settings(home=home)
    lake.write_small_lake(again.lake_dir, start=lake.T0 + timedelta(hours=16), hours=2)
    lake.write_small_lake(again.lake_dir, start=lake.T0 - timedelta(hours=23), hours=1, cluster="c2")
    _write_serving(again.lake_dir, 16, 18)
    _write_late_serving(again.lake_dir)
    result = run_build(again)
    full = Settings(home=tmp_path_factory.mktemp("full-again"))
    shutil.copytree(again.lake_dir, full.lake_dir)
    run_build(full, full_refresh=True)
    return again, result, full


def _assert_same_tables(inc: Settings, full: Settings) -> None:
    assert_same_tables(inc.warehouse_path, full.warehouse_path, {
        "fct_gpu_allocation_hourly", "fct_node_hourly", "fct_showback_daily", "fct_workload_daily",
        "fct_cluster_capacity_hourly", "int_snapshot_timeline", "int_node_costs_hourly", "dim_workload"})


def test_incremental_build_equals_a_full_build_row_for_row(builds):
    inc, result, full = builds
    assert result.success and not result.full_refresh and result.note is None
    assert result.count("seed") == 0  # seed files unchanged since the full build: not reloaded
    built = {n.name for n in result.nodes}
    # nothing the intermediate views are made of changed: the live version's views are kept, and so
    # are the staging views that glob their table's files (they read what landed since)
    assert "int_pod_costs_hourly" not in built and "int_pod_utilization_hourly" not in built
    assert "int_node_costs_hourly" in built  # an incremental table: its window is rebuilt
    assert "fct_gpu_allocation_hourly" in built and "stg_k8s__pods" not in built
    _assert_same_tables(inc, full)
    counts = []
    for s in (inc, full):
        con = duckdb.connect(str(s.warehouse_path), read_only=True)
        try:
            counts.append(con.sql("select count(*), count(distinct cluster), max(snapshot_ts) from stg_k8s__pods").fetchall())
        finally:
            con.close()
    assert counts[0] == counts[1] and counts[0][0][1] == 2  # the new cluster's and hours' snapshots too


def test_staging_views_without_files_are_made_again(builds):
    from transform.runner import kept_staging_views

    inc, result, _ = builds
    kept = kept_staging_views(inc.warehouse_path.resolve())
    assert "stg_k8s__pods" in kept and "stg_dcgm__gpu_samples" in kept
    # a table with no files yet is a typed empty view: made again each build, until files land
    con = duckdb.connect(str(inc.warehouse_path), read_only=True)
    try:
        empty = {v for (v,) in con.sql("select view_name from duckdb_views() where view_name like 'stg%' "
                                        "and sql not like '%read_parquet(%'").fetchall()}
    finally:
        con.close()
    assert empty and not (empty & set(kept))
    assert empty <= {n.name for n in result.nodes}


def test_a_changed_setting_makes_the_intermediate_views_again(builds, tmp_path):
    from transform import run_build

    inc, _, _ = builds
    home = tmp_path / "home"
    shutil.copytree(inc.home, home, symlinks=True)
    result = run_build(Settings(home=home), extra_vars={"residual_floor_fraction": 0.25})
    built = {n.name for n in result.nodes}
    assert not result.full_refresh and {"int_node_costs_hourly", "int_pod_costs_hourly"} <= built


def test_a_window_bounded_by_one_constant_still_equals_a_full_build(second):
    again, result, full = second
    assert result.success and not result.full_refresh
    compiled = (Path(again.home) / "dbt" / "target" / "compiled" / "gpufinops" / "models" / "marts"
                / "fct_gpu_allocation_hourly.sql").read_text()
    # the constant bound (c2's newest hour less the lookback: the older cutoff) before the per-cluster CASE
    assert "where src.hour >= (cast('2026-11-01 10:00:00' as timestamp) - " in compiled, compiled[:800]
    # the Python capacity model gets the lake's clusters (its own constant bound)
    capacity = (Path(again.home) / "dbt" / "target" / "compiled" / "gpufinops" / "models" / "marts"
                / "fct_cluster_capacity_hourly.py").read_text()
    assert "'lake_clusters': 'c1|c2'" in capacity
    # the pod snapshots are bounded on the files' own time column (Parquet row groups can be skipped):
    # c2's newest hour less the lookback, one hour and the coverage cap (3 × 60 s)
    pods = (Path(again.home) / "dbt" / "target" / "compiled" / "gpufinops" / "models" / "intermediate"
            / "int_pods_hourly.sql").read_text()
    assert "\"snapshot_ts\" >= cast('2026-11-01 05:57:00+00' as timestamptz)" in pods
    _assert_same_tables(again, full)
    con = duckdb.connect(str(again.warehouse_path), read_only=True)
    try:
        late = con.sql("select hour::varchar, requests, samples from int_serving_counters_hourly "
                       "where model = 'late-s' order by 1").fetchall()
        stale = con.sql("select function_name from duckdb_functions() where macro_definition like '%_building%' "
                        "union all select view_name from duckdb_views() where sql like '%_building%'").fetchall()
    finally:
        con.close()
    # dbt wrote the version as _building.duckdb: nothing published may name that catalog
    assert stale == [], stale
    # the back-fill older than the lookback is in: 6 samples an hour, +10 each, the reset at 3h counts 0
    assert late == [("2026-11-02 12:00:00", 50.0, 6), ("2026-11-02 13:00:00", 50.0, 6)]


def test_budgets_rebuild_from_the_first_day_whose_spend_lines_changed(builds, tmp_path):
    """fct_budget_run_rate_daily is incremental: it compares this build's spend lines with the ones recorded
    by the build before (_budget_spend_lines) and rebuilds the days from the first that differs. Fleet
    rows marked by hand (month_to_date_usd = -1) show which days a build rewrote."""
    from transform import run_build

    inc, _, _ = builds
    home = tmp_path / "home"
    shutil.copytree(inc.home, home, symlinks=True)
    settings = Settings(home=home)

    def fleet(path: Path) -> dict[str, float]:
        con = duckdb.connect(str(path), read_only=True)
        try:
            return dict(con.sql("select day::varchar, month_to_date_usd from fct_budget_run_rate_daily "
                                "where scope_kind = 'fleet'").fetchall())
        finally:
            con.close()

    def mark(sql: str) -> None:
        con = duckdb.connect(str(settings.warehouse_path))
        try:
            con.execute(sql)
        finally:
            con.close()

    before = fleet(settings.warehouse_path)
    assert sorted(before) == ["2026-11-01", "2026-11-02", "2026-11-03"]
    mark("update fct_budget_run_rate_daily set month_to_date_usd = -1 where scope_kind = 'fleet'")
    # two more hours of c1 on 11-03: only that day's lines change
    lake.write_small_lake(settings.lake_dir, start=lake.T0 + timedelta(hours=16), hours=2)
    assert run_build(settings).success
    after = fleet(settings.warehouse_path)
    assert after["2026-11-01"] == after["2026-11-02"] == -1  # kept: their lines did not change
    assert after["2026-11-03"] > before["2026-11-03"] > 0  # rebuilt, with the new hours' cost

    # a recorded line of 11-01 that no longer matches: every day from 11-01 is rebuilt
    mark("update _budget_spend_lines set spend_usd = spend_usd + 100 where scope_kind = 'fleet' and day = '2026-11-01'")
    assert run_build(settings).success
    again = fleet(settings.warehouse_path)
    assert again["2026-11-01"] == pytest.approx(before["2026-11-01"], rel=1e-12)
    assert again["2026-11-02"] == pytest.approx(before["2026-11-02"], rel=1e-12)
    assert again["2026-11-03"] == pytest.approx(after["2026-11-03"], rel=1e-12)


def test_the_new_hours_and_the_late_cluster_are_in(builds):
    inc, _, _ = builds
    con = duckdb.connect(str(inc.warehouse_path), read_only=True)
    try:
        hours = con.sql("select cluster, min(hour)::varchar, max(hour)::varchar from fct_cluster_capacity_hourly "
                        "group by 1 order by 1").fetchall()
        days = con.sql("select cluster, count(distinct day) from fct_showback_daily group by 1 order by 1").fetchall()
        window = con.sql("select cluster, since::varchar from _build_window").fetchall()
    finally:
        con.close()
    assert hours == [("c1", "2026-11-02 10:00:00", "2026-11-03 01:00:00"), ("c2", "2026-11-01 10:00:00", "2026-11-01 10:00:00")]
    assert days == [("c1", 2), ("c2", 1)]
    # the window the incremental build's data tests checked: c1 from its newest hour before the run
    # minus the 3 h lookback; c2 was new (tested in full)
    assert window == [("c1", "2026-11-02 20:00:00")]


def test_serving_counters_continue_across_the_rebuilt_window(builds):
    """int_serving_counters_hourly is incremental: a series resumes from its last sample before the
    rebuilt window (kept in the row), even after a gap longer than the lookback; a reset counts v."""
    inc, _, _ = builds
    con = duckdb.connect(str(inc.warehouse_path), read_only=True)
    try:
        rows = dict(((p, h), (r, g)) for p, h, r, g in con.sql(
            "select pod, hour::varchar, requests, generation_tokens from int_serving_counters_hourly "
            "where cluster = 'c1'").fetchall())
    finally:
        con.close()
    # serve-gap: last sample before the gap at T0+8h50 (2 × 530 = 1060), next at T0+15h (2 × 900 = 1800)
    # then five more samples at +20 each in that hour
    assert rows[("serve-gap", "2026-11-03 01:00:00")] == (1800 - 1060 + 5 * 20, pytest.approx(5 * (900 - 530) + 5 * 50))
    assert ("serve-gap", "2026-11-02 19:00:00") not in rows
    # serve-b: the reset at T0+15h counts 3, then 11 samples at +10
    assert rows[("serve-b", "2026-11-03 01:00:00")][0] == 3 + 11 * 10
    assert rows[("serve-b", "2026-11-03 00:00:00")][0] == 12 * 10
    # new-x has no generation counter: null, not 0
    assert rows[("new-x", "2026-11-03 00:00:00")] == (45.0, None)


def test_incremental_data_tests_check_the_rebuilt_window(builds):
    """The hourly build runs the invariants (the singular tests of tests/dbt: conservation, showback and
    FOCUS sums, daily = hourly) on the rebuilt window; `--all-tests` adds every generic test."""
    from transform import run_build

    inc, result, _ = builds
    singular = {p.stem for p in (Path(__file__).parent / "dbt").glob("*.sql")}
    tests = [n for n in result.nodes if n.resource_type == "test"]
    assert result.tests_scope == "invariants"
    assert {n.name for n in tests} == singular and all(n.status == "pass" for n in tests)
    every = run_build(inc, all_tests=True)
    assert every.success and not every.full_refresh and every.tests_scope == "all"
    generic = [n for n in every.nodes if n.resource_type == "test" and n.name not in singular]
    assert len(generic) >= 50 and [n.name for n in generic if n.status not in ("pass", "warn")] == []


def test_changed_seed_files_make_the_build_a_full_one(builds):
    """The seed tables were loaded from other files than seeds/ holds now (simulated by the recorded
    digest): an incremental build reloads them and rebuilds everything, and says so."""
    import json

    from transform import run_build, seed_digest

    _, _, full = builds
    state = Path(full.home) / "dbt" / "seeds.json"
    recorded = json.loads(state.read_text())
    assert recorded["digest"] == seed_digest()
    state.write_text(json.dumps(recorded | {"digest": "0" * 64}))
    result = run_build(full)
    assert result.success and result.full_refresh
    assert result.note is not None and "seed" in result.note
    assert result.count("seed") == 4
    assert json.loads(state.read_text())["digest"] == seed_digest()


@pytest.fixture(scope="module")
def late_bill(second, tmp_path_factory):
    """Two more incremental builds on a copy of the second: the first lands an hour of both clusters on
    2026-11-03 (so every cluster's window starts on 11-02); the second lands the FOCUS bill of every
    node-day of 11-01 (older than every window) and 11-02, and one more hour of c1."""
    from ingest.focus import ingest_focus_files
    from ingest.focus.demo_bill import write_demo_bill
    from transform import run_build

    again, _, _ = second
    home = tmp_path_factory.mktemp("bill") / "home"
    shutil.copytree(again.home, home, symlinks=True)
    billed = Settings(home=home)
    for cluster in ("c1", "c2"):
        lake.write_small_lake(billed.lake_dir, start=lake.T0 + timedelta(hours=18), hours=1, cluster=cluster)
    assert run_build(billed).success
    con = duckdb.connect(str(billed.warehouse_path), read_only=True)
    try:
        bill = write_demo_bill(con, home / "bill.csv", lake_dir=billed.lake_dir)
    finally:
        con.close()
    # the bill of 11-01 and 11-02 (the small lake's two clusters share their instance ids: one day each)
    with bill.path.open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["ChargePeriodStart"] < "2026-11-03"]
    assert {r["SubAccountId"] for r in rows} == {"demo-c1", "demo-c2"}
    with (home / "bill-1101-1102.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    ingest_focus_files(billed.lake_dir, [home / "bill-1101-1102.csv"])
    lake.write_small_lake(billed.lake_dir, start=lake.T0 + timedelta(hours=19), hours=1)
    result = run_build(billed)
    full = Settings(home=tmp_path_factory.mktemp("full-bill"))
    shutil.copytree(billed.lake_dir, full.lake_dir)
    run_build(full, full_refresh=True)
    return billed, result, full


def test_a_late_bill_for_a_day_before_the_window_is_split_like_a_full_build(late_bill):
    """fct_focus_allocation_daily is incremental per day: it rebuilds the window's days and every older
    day whose bill changed, so a bill for 11-01 (c2's only day, before both clusters' cutoffs) is split."""
    billed, result, full = late_bill
    assert result.success and not result.full_refresh
    compiled = (Path(billed.home) / "dbt" / "target" / "compiled" / "gpufinops" / "models" / "marts"
                / "fct_focus_allocation_daily.sql").read_text()
    # the window: from 11-02 (the clusters' newest day 11-03 less the lookback), plus the billed old day
    assert "day >= cast('2026-11-02' as date) or day in (cast('2026-11-01' as date))" in compiled
    con = duckdb.connect(str(billed.warehouse_path), read_only=True)
    try:
        origins = con.sql("select distinct day::varchar, charge_origin from fct_focus_allocation_daily "
                          "where cluster = 'c2' order by 1").fetchall()
    finally:
        con.close()
    # c2's 11-01 is split from the bill now (it was a computed charge); 11-03 has no bill yet
    assert origins == [("2026-11-01", "bill"), ("2026-11-03", "computed")]
    _assert_same_tables(billed, full)
