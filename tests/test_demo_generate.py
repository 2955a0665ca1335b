"""End to end: ``gpufinops demo`` on a tiny fleet, read back from the lake with DuckDB.

Checks the invariants the warehouse relies on (DESIGN §3): no node over-allocated at any snapshot,
one DCGM sample per (device or MIG instance, pod) per minute, attribution that resolves to ≥ 8
teams in ≥ 3 tenants with some unassigned, low serving and high training utilisation, idle pods,
unmeasured GPUs, pending pods; plus determinism and idempotent re-runs.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from cli.main import app
from ingest.demo.catalog import MIG_PROFILES
from ingest.demo.generate import DEMO_TABLES
from ingest.lake import list_runs, partition_files

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SEEDS = Path(__file__).resolve().parents[1] / "seeds"
ARGS = ["demo", "--nodes", "12", "--days", "1", "--clusters", "2"]

pytestmark = pytest.mark.skipif(not (DATA / "openb").is_dir(), reason="shared traces not present")


def _run(home: Path, *extra: str) -> None:
    result = CliRunner().invoke(app, ["--home", str(home), *ARGS, *extra])
    assert result.exit_code == 0, result.output
    assert "rows gpu_samples" in result.output


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("demo")
    _run(home, "--workers", "2")
    return home


def _con(home: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    lake = home / "lake"
    for t in (*DEMO_TABLES, "prices"):
        files = [str(p) for p in partition_files(lake, t)]
        assert files, f"no {t} files"
        con.execute(f"create view {t} as select * from read_parquet({files!r}, hive_partitioning=false)")
    con.execute(f"create view seed as select * from read_csv('{SEEDS / 'namespace_teams.csv'}')")
    return con


def _q(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


_MIG_CASE = " ".join(
    f"when k = '{p.resource}' then v * {p.gpu_equiv!r}" for p in MIG_PROFILES.values()
)
# gpu_equiv of each running pod per DESIGN §3 (annotation > MIG > nvidia.com/gpu[.shared] / replicas)
_POD_EQUIV = f"""
with running as (
  select p.cluster, p.snapshot_ts, p.node, p.namespace, p.pod, p.annotations, p.containers, n.gpu_replicas
  from k8s_pods p join k8s_nodes n using (cluster, snapshot_ts, node) where p.phase = 'Running'
), kv as (
  select r.*, unnest(map_keys(c.requests)) as k, unnest(map_values(c.requests)) as v
  from running r, unnest(r.containers) as t(c)
), per_pod as (
  select cluster, snapshot_ts, node, namespace, pod, any_value(annotations) as annotations,
         any_value(gpu_replicas) as gpu_replicas,
         sum(case {_MIG_CASE}
                  when k in ('nvidia.com/gpu', 'nvidia.com/gpu.shared') then v / coalesce(gpu_replicas, 1)
                  else 0 end) as eq,
         sum(case when k = 'cpu' then v else 0 end) as cpu,
         sum(case when k = 'memory' then v else 0 end) as mem
  from kv group by all
)
select *, coalesce(try_cast(annotations['gpufinops.io/gpu-milli'] as double) / 1000, eq) as gpu_equiv from per_pod
"""


def test_runs_one_per_cluster_day_with_all_tables(home: Path) -> None:
    runs = [r for r in list_runs(home / "lake") if r.source == "demo" and r.status == "committed"]
    assert {r.cluster for r in runs} == {"prod-aws", "research-gcp"}
    for r in runs:
        assert set(r.rows) == set(DEMO_TABLES)
        assert all(n > 0 for n in r.rows.values())
        assert r.window_start.startswith("2026-11-01") and r.window_end.startswith("2026-11-02")
    assert any(r.source == "price_card" for r in list_runs(home / "lake"))


def test_every_node_has_a_price(home: Path) -> None:
    con = _con(home)
    unpriced = _q(con, """
        select distinct n.instance_type, n.capacity_type from k8s_nodes n
        anti join prices p on p.provider = n.provider and p.region = n.region
          and p.instance_type = n.instance_type and p.capacity_type = n.capacity_type""")
    assert unpriced == []


def test_no_node_is_over_allocated_at_any_snapshot(home: Path) -> None:
    con = _con(home)
    over = _q(con, f"""
        with e as ({_POD_EQUIV})
        select e.cluster, e.snapshot_ts, e.node, sum(e.gpu_equiv) g, any_value(n.gpu_count) cap,
               sum(e.cpu) c, any_value(n.allocatable['cpu']) ac, sum(e.mem) m, any_value(n.allocatable['memory']) am
        from e join k8s_nodes n using (cluster, snapshot_ts, node)
        group by all
        having g > coalesce(cap, 0) + 1e-9 or c > ac + 1e-9 or m > am + 1""")
    assert over == [], over[:5]
    # and the fleet is genuinely busy: GPU allocation over the day within a realistic band
    (alloc,) = _q(con, f"""
        with e as ({_POD_EQUIV})
        select (select sum(gpu_equiv) from e) / (select sum(gpu_count) from k8s_nodes)""")[0]
    assert 0.45 < alloc < 0.9


def test_sharing_modes_are_all_used(home: Path) -> None:
    con = _con(home)
    resources = {r[0] for r in _q(con, """
        select distinct k from (select unnest(map_keys(c.requests)) k from k8s_pods, unnest(containers) t(c))""")}
    assert {"nvidia.com/gpu", "nvidia.com/gpu.shared"} <= resources
    assert len({r for r in resources if r.startswith("nvidia.com/mig-")}) >= 2
    (n_frac,) = _q(con, "select count(distinct pod) from k8s_pods where annotations['gpufinops.io/gpu-milli'] is not null")[0]
    assert n_frac > 0
    multi = _q(con, """select count(distinct pod) from k8s_pods, unnest(containers) t(c)
                       where c.requests['nvidia.com/gpu'] >= 2""")[0][0]
    assert multi > 0


def test_attribution_resolves_teams_tenants_and_unassigned(home: Path) -> None:
    con = _con(home)
    rows = _q(con, """
        with ns as (select distinct on (cluster, namespace) * from k8s_namespaces order by cluster, namespace, snapshot_ts),
        pods as (select distinct on (cluster, namespace, pod) * from k8s_pods order by cluster, namespace, pod, snapshot_ts)
        select coalesce(p.labels['team'], ns.labels['team'], ns.annotations['team'], s.team, 'unassigned') team,
               coalesce(p.labels['tenant'], ns.labels['tenant'], ns.annotations['tenant'], s.tenant, 'unassigned') tenant,
               count(*) n,
               count(*) filter (where p.labels['team'] is not null and p.labels['team'] <> ns.labels['team']) pod_label_wins,
               count(*) filter (where ns.labels['team'] is null and ns.annotations['team'] is not null) by_annotation,
               count(*) filter (where ns.labels['team'] is null and ns.annotations['team'] is null and s.team is not null) by_seed
        from pods p join ns using (cluster, namespace) left join seed s on s.namespace = p.namespace
        group by all""")
    teams = {r[0] for r in rows} - {"unassigned", "sre"}
    tenants = {r[1] for r in rows} - {"unassigned"}
    assert len(teams) >= 8 and len(tenants) >= 3
    assert "unassigned" in {r[0] for r in rows}
    assert sum(r[3] for r in rows) > 0 and sum(r[4] for r in rows) > 0 and sum(r[5] for r in rows) > 0


def test_one_sample_per_unit_and_pod_per_minute(home: Path) -> None:
    con = _con(home)
    dup = _q(con, """select count(*) from (select cluster, ts, hostname, uuid, mig_instance, pod, count(*) n
                      from gpu_samples group by all having n > 1)""")[0][0]
    assert dup == 0
    off_grid = _q(con, "select count(*) from gpu_samples where epoch(ts)::bigint % 60 <> 0")[0][0]
    assert off_grid == 0
    bad_fb = _q(con, """select count(*) from gpu_samples
                        where abs(fb_used_mib + fb_free_mib - (select max(fb_used_mib + fb_free_mib)
                              from gpu_samples g2 where g2.uuid = gpu_samples.uuid and g2.mig_instance is not distinct from gpu_samples.mig_instance)) > 1""")[0][0]
    assert bad_fb == 0
    # a shared device: several pods' series at the same minute carry the device's value
    shared = _q(con, """select count(*) from (select ts, uuid, count(distinct pod) np, count(distinct gr_engine_active) nv
                        from gpu_samples where pod is not null and mig_instance is null group by all having np > 1)""")[0][0]
    same = _q(con, """select count(*) from (select ts, uuid, count(distinct pod) np, count(distinct gr_engine_active) nv
                      from gpu_samples where pod is not null and mig_instance is null group by all having np > 1 and nv = 1)""")[0][0]
    assert shared > 0 and same == shared
    # MIG instances report with their profile and GPU_I_ID
    assert _q(con, "select count(distinct mig_profile) from gpu_samples where mig_instance is not null")[0][0] >= 2
    # idle devices still report, with empty pod labels
    assert _q(con, "select count(*) from gpu_samples where pod is null")[0][0] > 0


def test_serving_is_light_training_busy_and_some_pods_idle(home: Path) -> None:
    con = _con(home)
    tiers = dict(_q(con, """
        with owner as (select distinct namespace, pod, owner_kind, priority_class from k8s_pods)
        select case when o.priority_class = 'serving-high' then 'serving'
                    when o.owner_kind in ('PyTorchJob', 'RayJob') then 'training' else 'other' end tier,
               avg(g.gr_engine_active)
        from gpu_samples g join owner o using (namespace, pod) group by all"""))
    assert tiers["serving"] < 0.15
    assert tiers["training"] > 0.5
    idle = _q(con, """select count(*) from (select namespace, pod, avg(gr_engine_active) u, count(*) n
                      from gpu_samples where pod is not null group by all having u < 0.01 and n >= 60)""")[0][0]
    assert idle > 0


def test_unmeasured_gpus_and_pending_pods_exist(home: Path) -> None:
    con = _con(home)
    unmeasured = _q(con, """select count(distinct node) from k8s_nodes where gpu_count > 0
                            and node not in (select distinct hostname from gpu_samples)""")[0][0]
    assert unmeasured > 0
    pending_gpu = _q(con, """select count(distinct pod) from k8s_pods, unnest(containers) t(c)
                             where phase = 'Pending' and node is null
                               and len(list_filter(map_keys(c.requests), lambda k: k like 'nvidia.com/%')) > 0""")[0][0]
    assert pending_gpu > 0


def test_some_usage_exceeds_requests(home: Path) -> None:
    con = _con(home)
    over = _q(con, """
        with req as (select distinct namespace, pod, c.name container, c.requests['cpu'] cpu from k8s_pods, unnest(containers) t(c))
        select count(*) from (select u.namespace, u.pod, avg(u.cpu_cores) use, any_value(r.cpu) cpu
                              from container_usage u join req r using (namespace, pod, container) group by all having use > cpu)""")[0][0]
    assert over > 0


def _digest(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """An order-independent digest of a table's rows, run columns aside."""
    return con.execute(f"""
        select md5(string_agg(h, '' order by h)) from (
          select md5(x::varchar) h from (select * exclude (ingest_run_id, ingested_at) from {table}) x)""").fetchall()[0][0]


def test_rerun_is_idempotent_and_deterministic(home: Path) -> None:
    con = _con(home)
    before = {t: _q(con, f"select count(*) from {t}")[0][0] for t in (*DEMO_TABLES, "prices")}
    digests = {t: _digest(con, t) for t in ("k8s_pods", "gpu_samples")}
    files_before = sorted(p.name for t in DEMO_TABLES for p in partition_files(home / "lake", t))
    # same options and seed, one process instead of two: the same slices get the same rows
    _run(home, "--workers", "1")
    con = _con(home)
    after = {t: _q(con, f"select count(*) from {t}")[0][0] for t in (*DEMO_TABLES, "prices")}
    assert after == before
    assert sorted(p.name for t in DEMO_TABLES for p in partition_files(home / "lake", t)) == files_before
    assert {t: _digest(con, t) for t in digests} == digests
    runs = [r for r in list_runs(home / "lake") if r.source == "demo"]
    assert len({r.run_id for r in runs}) == 2 * len({r.cluster for r in runs})


def test_a_shorter_rerun_clears_the_days_it_no_longer_covers(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "demo", "--nodes", "8", "--days", "2",
                                      "--clusters", "1", "--snapshot-interval", "600"])
    assert result.exit_code == 0, result.output
    days = lambda: {p.parent.name for p in partition_files(tmp_path / "lake", "k8s_pods")}  # noqa: E731
    assert days() == {"day=2026-11-01", "day=2026-11-02"}
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "demo", "--nodes", "8", "--days", "1",
                                      "--clusters", "1", "--snapshot-interval", "600"])
    assert result.exit_code == 0, result.output
    assert days() == {"day=2026-11-01"}


def test_bad_options_fail_cleanly(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "demo", "--nodes", "3"])
    assert result.exit_code == 2 and "--nodes" in result.output
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "demo", "--start", "Nov 1"])
    assert result.exit_code == 2 and "--start" in result.output
    assert not partition_files(tmp_path / "lake", "gpu_samples")
