"""Loader, engine and CLI on dbt-built warehouses: the small hand-made lake (exact numbers, its
docstring has the scenario) and the tiny demo fleet (every strategy end to end).

No table here is hand-written: the recommender reads only the marts dbt built.
"""

from __future__ import annotations

import math
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from cli.commands import recommend as recommend_cmd
from gpufinops.errors import ConfigError
from gpufinops.settings import Settings
from gpufinops.warehouse import connect
from recommender.engine import plan, run
from recommender.histogram import CPU_SPEC, MEMORY_SPEC
from recommender.loader import load_input
from recommender.model import stable_id
from recommender.store import RecommendationStore

GIB = 1024**3
ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def small(small_lake_build) -> Settings:
    return small_lake_build[0]


@pytest.fixture(scope="module")
def small_input(small):
    return load_input(small, now=NOW)


# -- exact numbers: the small lake ---------------------------------------------------------------

def test_gpu_evidence_per_workload_hour(small_input) -> None:
    d = small_input
    assert d.window_end == datetime(2026, 11, 2, 12, tzinfo=UTC)  # newest hour 11:00 + 1 h
    by = {w.workload: w for w in d.gpu_usage}
    train = by["train"]  # train-a: one A100, gr_engine_active 0.5 every minute for 2 h
    assert [h.hour.hour for h in train.hourly] == [10, 11]
    assert [h.samples for h in train.hourly] == [60, 60]
    assert all(h.util_mean == pytest.approx(0.5) and h.util_p95 == pytest.approx(0.5) for h in train.hourly)
    assert train.util_p95 == pytest.approx(0.5) and train.util_mean == pytest.approx(0.5)
    # gpu8 at $0.9 per GPU-hour (small_lake docstring), one GPU held all hour
    assert [h.gpu_cost_usd for h in train.hourly] == pytest.approx([0.9, 0.9])
    assert train.gpus_per_pod == 1 and train.replicas == 1 and train.gpu_family == "A100-80GB"
    # the 7-day window evidence merges both pods' series: share-c and share-d, 0.4 each, 2 h
    share = by["share"]
    assert sum(h.samples for h in share.hourly) == 240 and share.util_p95 == pytest.approx(0.4)
    # milli-f: 0.235 lands exactly on a 0.5 % bucket
    assert by["milli"].util_p95 == pytest.approx(0.235)


def test_spot_prices_respect_their_effective_window(small_input) -> None:
    train = {w.workload: w for w in small_input.gpu_usage}["train"]
    # the $99 on-demand row ended 2026-06-01: the $9 row is the one in effect
    assert (train.on_demand_usd_per_hour, train.spot_usd_per_hour) == (9.0, 3.6)
    assert train.capacity_type == "on_demand" and train.instance_type == "test.8gpu"


def test_latest_placements(small_input) -> None:
    [snap] = small_input.snapshots
    assert {n.name: n.hourly_price_usd for n in snap.nodes} == pytest.approx(
        {"gpu8": 9.0, "spot8": 3.6, "ts": 2.0, "mig": 7.6, "nop": 0.0})
    pods = {p.pod: p for p in snap.pods}
    # spot-g left after the first hour, pending-j is not bound: neither is placed now
    assert set(pods) == {"train-a", "serve-b", "share-c", "share-d", "mig-e", "milli-f", "cpu-h", "ds-i"}
    # serve-b asks for GPUs only as a limit: the effective request (int_pod_specs) is the limit
    assert pods["serve-b"].requests["nvidia.com/gpu"] == 2.0 and pods["serve-b"].tier == "serving"
    assert pods["milli-f"].gpu_fraction == pytest.approx(0.47) and pods["milli-f"].gpu_equiv == pytest.approx(0.47)
    assert pods["mig-e"].requests == {"cpu": 1.0, "memory": float(GIB), "nvidia.com/mig-1g.10gb": 1.0}
    assert pods["share-c"].gpu_equiv == pytest.approx(0.25)  # 1 of 4 time-sliced replicas
    assert pods["ds-i"].is_daemonset and pods["ds-i"].tier == "system"
    assert {n.name for n in snap.nodes if n.mig} == {"mig"}


def test_container_histograms(small_input) -> None:
    [c] = [c for c in small_input.container_usage if c.workload == "train"]
    assert (c.container, c.cpu_request, c.memory_request) == ("main", 2.0, 10.0 * GIB)
    assert c.samples == 120 and c.memory_peak == pytest.approx(5.0 * GIB)
    # 3 cores every minute: all weight in VPA bucket floor(ln(3 / 0.01) / ln 1.05) = 116
    assert set(c.cpu_buckets) == {int(math.floor(math.log(3.0 / 0.01) / math.log(1.05)))} == {116}
    # hourly decay (half-life 24 h) relative to the window end 12:00: hour 10 at 10:30, hour 11 at 11:30
    assert c.cpu_buckets[116] == pytest.approx(60 * 2 ** (-1.5 / 24) + 60 * 2 ** (-0.5 / 24))
    # memory: one peak per pod-hour, decayed at the hour's end
    assert sum(c.memory_buckets.values()) == pytest.approx(2 ** (-1 / 24) + 1.0)
    assert c.cpu_cost_usd_per_core_hour == pytest.approx(0.09)  # gpu8's $/core-h (small_lake docstring)


def test_mig_table_comes_from_the_warehouse(small_input) -> None:
    assert [p.profile for p in small_input.mig_profiles["A100-80GB"]][:2] == ["1g.10gb", "1g.20gb"]


def test_window_quantiles_are_exact_merges_not_percentiles_of_percentiles(small) -> None:
    con = connect(small.warehouse_path, read_only=True)
    try:
        # two hours merged: the window p95 of `share` is read off the summed bucket counts
        rows = con.execute("""select workload, samples, util_p50, util_p95, util_max, hours
                              from gpu_workload_evidence_window(timestamp '2026-11-02 10:00', timestamp '2026-11-02 12:00')
                              order by workload""").fetchall()
        one = con.execute("""select samples from gpu_workload_evidence_window(timestamp '2026-11-02 11:00',
                             timestamp '2026-11-02 12:00') where workload = 'train'""").fetchone()
    finally:
        con.close()
    by = {r[0]: r for r in rows}
    assert by["share"][1:] == (240, pytest.approx(0.4), pytest.approx(0.4), pytest.approx(0.4), 2)
    assert by["spot"][1] == 120 and by["spot"][3] == pytest.approx(1.0)  # 2 devices × 60 samples, 1 h
    assert one == (60,)


def test_missing_warehouse_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="gpufinops build"):
        load_input(Settings(home=tmp_path))


# -- the demo fleet: every strategy end to end ---------------------------------------------------

def test_window_p95_equals_the_nearest_rank_of_the_raw_samples(fleet) -> None:
    """Merged hourly histograms over 24 h give the p95 of all the window's samples, bucketed."""
    import duckdb

    wcon = connect(fleet.warehouse, read_only=True)
    try:
        end = wcon.execute("select max(hour) + interval 1 hour from fct_workload_gpu_hourly").fetchone()[0]
        start = end - timedelta(hours=24)
        cluster, ns, wl, p95, n, fb_peak = wcon.execute("""
            select cluster, namespace, workload, util_p95, samples, fb_used_max_mib
            from gpu_workload_evidence_window(?, ?)
            where samples > 500 order by samples desc limit 1""", [start, end]).fetchone()
        pods = [r[0] for r in wcon.execute("""select distinct pod from fct_gpu_device_evidence_hourly
            where cluster = ? and namespace = ? and workload = ?""", [cluster, ns, wl]).fetchall()]
    finally:
        wcon.close()
    files = sorted(str(p) for p in (Path(fleet.settings.lake_dir) / "gpu_samples").glob(f"cluster={cluster}/day=*/*.parquet"))
    u = duckdb.sql(f"""select greatest(0.0, least(1.0, coalesce(gr_engine_active, gpu_util / 100.0))) as u
        from read_parquet({files!r}, union_by_name = true, hive_partitioning = false)
        where namespace = '{ns}' and pod in ({", ".join(repr(p) for p in pods)})
          and ts >= '{start.isoformat()}+00' and ts < '{end.isoformat()}+00'
          and coalesce(gr_engine_active, gpu_util) is not null order by u""").fetchall()
    assert len(u) == n
    buckets = sorted(round(x[0] * 200) for x in u)
    assert p95 == pytest.approx(buckets[math.ceil(0.95 * len(buckets)) - 1] / 200)
    # the framebuffer peak GPU memory is sized by: the largest raw sample of the window
    (fb_max, fb_n), = duckdb.sql(f"""select max(fb_used_mib), count(fb_used_mib)
        from read_parquet({files!r}, union_by_name = true, hive_partitioning = false)
        where namespace = '{ns}' and pod in ({", ".join(repr(p) for p in pods)})
          and ts >= '{start.isoformat()}+00' and ts < '{end.isoformat()}+00'""").fetchall()
    assert fb_n > 500 and fb_peak == pytest.approx(fb_max)


def test_every_kind_the_demo_supports(fleet) -> None:
    data = load_input(fleet.settings, now=NOW)
    recs = plan(data)
    kinds = {r.kind for r in recs}
    assert {"reclaim_idle_gpu", "rightsize_cpu_mem", "rightsize_to_mig"} <= kinds
    for r in recs:
        assert r.evidence and r.est_monthly_savings_usd != 0 and r.id
    # evidence is the warehouse's: a reclaim's GPU-hours add up to the mart's over its idle window
    rec = next(r for r in recs if r.kind == "reclaim_idle_gpu")
    con = connect(fleet.warehouse, read_only=True)
    try:
        gpu_hours = con.execute("""select sum(gpu_hours) from fct_gpu_allocation_hourly where cluster = ?
            and namespace = ? and workload = ? and hour >= ? and hour < ?""",
            [rec.cluster, rec.namespace, rec.workload, datetime.fromisoformat(rec.evidence["window_start"]).replace(tzinfo=None),
             datetime.fromisoformat(rec.evidence["window_end"]).replace(tzinfo=None)]).fetchone()[0]
    finally:
        con.close()
    assert rec.evidence["gpu_hours"] == pytest.approx(gpu_hours, abs=1e-3)


def test_run_writes_with_stable_ids_and_reruns_update(fleet_copy) -> None:
    first = run(fleet_copy.settings, now=NOW)
    assert first.written["inserted"] == len(first.recommendations) > 0
    second = run(fleet_copy.settings, now=NOW + timedelta(hours=1))
    assert second.written["inserted"] == 0 and second.written["updated"] == len(first.recommendations)
    rows = RecommendationStore(fleet_copy.settings.effective_app_db_url).list()
    assert len(rows) == len(first.recommendations)
    r = first.recommendations[0]
    assert stable_id(r.kind, r.cluster, r.namespace, r.workload, *r.id_extra) in {x["id"] for x in rows}


def test_cli_recommend(fleet) -> None:
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = fleet.settings

    recommend_cmd.register(app)
    res = CliRunner().invoke(app, ["recommend", "--dry-run", "--top", "3"])
    assert res.exit_code == 0, res.output
    assert "rightsize_cpu_mem" in res.output and "dry run" in res.output


# -- one truth -------------------------------------------------------------------------------------

def test_warehouse_histogram_spec_is_the_strategy_spec() -> None:
    v = yaml.safe_load((ROOT / "dbt_project.yml").read_text())["vars"]
    assert v["vpa_histogram_ratio"] == CPU_SPEC.ratio == MEMORY_SPEC.ratio
    assert (v["vpa_cpu_first_bucket"], v["vpa_memory_first_bucket"]) == (CPU_SPEC.first_bucket, MEMORY_SPEC.first_bucket)


# Paths allowed to read the Parquet lake (nothing else may):
# ingest/ writes and checks the lake; macros/landing.sql is the landing layer; tests/ and bench/ compare
# against raw samples; testsupport/ (not shipped) serves the demo lake as a fake Kubernetes API.
_LAKE_READERS_ALLOWED = ("ingest/", "macros/landing.sql", "tests/", "bench/", "testsupport/")
# transform/spark.py reads Parquet too, but the marts Spark wrote under <home>/spark/warehouse (the
# serving views of a Spark build), never the lake: checked below.
_MART_READERS = {"transform/spark.py"}


def test_no_lake_read_outside_ingest_and_the_landing_macros() -> None:
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for f in files:
        if not f.endswith((".py", ".sql")) or f.startswith(_LAKE_READERS_ALLOWED):
            continue
        text = (ROOT / f).read_text(errors="replace")
        if f in _MART_READERS:
            assert "lake_dir" not in text.split("def write_serving_views", 1)[1].split("\ndef ", 1)[0], f
            continue
        if re.search(r"read_parquet|parquet_scan", text):
            offenders.append(f)
    assert offenders == [], f"lake read outside ingest/ and macros/landing.sql: {offenders}"
