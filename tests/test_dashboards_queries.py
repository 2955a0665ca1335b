"""The query layer on the dbt-built `fleet` fixture: every figure is the marts' own, conservation,
scoping, and a published build seen by the next query."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import duckdb
import pytest

from dashboards import queries
from gpufinops.views.names import SYNTHETIC_LINES
from gpufinops.views.scope import AccessDenied, Scope

D0, D1 = date(2026, 11, 1), date(2026, 11, 2)  # the fleet's one day
ALL = Scope.everything()


def _mart(fleet, sql, params=None):
    con = duckdb.connect(str(fleet.warehouse), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def world(fleet, tmp_path_factory):
    """(warehouse, shared namespaces, the costliest team, another team, their namespaces) with an app DB
    of its own: one open recommendation per team's namespace and a resolved one."""
    from gpufinops.appdb import open_app_db
    from gpufinops.appdb.schema import recommendations

    shared = tuple(fleet.settings.cost.shared_namespaces)
    teams = [t for t, in _mart(fleet, "select team from fct_showback_daily where not list_contains(?, namespace) "
                                      "and team <> 'unassigned' group by team order by sum(chargeback_usd) desc",
                               [[*SYNTHETIC_LINES, *shared]])]
    team, other = teams[0], teams[1]
    spaces = {t: _mart(fleet, "select distinct cluster, namespace from fct_showback_daily where team = ? "
                              "and not list_contains(?, namespace) order by all", [t, list(shared)])
              for t in (team, other)}
    url = f"sqlite:///{tmp_path_factory.mktemp('dash') / 'app.db'}"
    engine = open_app_db(url)
    at = datetime(2026, 11, 1, 23, tzinfo=UTC)
    rows = [("rec_t", team, "open", "reclaim_idle_gpu"), ("rec_o", other, "open", "reclaim_idle_gpu"),
            ("rec_old", team, "resolved", "reclaim_idle_gpu"), ("rec_p", other, "open", "consolidate_nodes")]
    with engine.begin() as conn:
        for rid, t, status, kind in rows:
            cluster, ns = spaces[t][0]
            conn.execute(recommendations.insert().values(
                id=rid, kind=kind, cluster=cluster, namespace=None if kind == "consolidate_nodes" else ns,
                workload="w", tier="batch", current={}, proposed={}, evidence={}, est_monthly_savings_usd=1.0,
                confidence=0.9, risk="low", created_at=at, updated_at=at, last_seen_at=at, status=status))
    engine.dispose()
    return queries.Warehouse.of(fleet.warehouse, url), shared, team, other, spaces


def _chargeback(fleet, team: str, shared) -> float:
    return _mart(fleet, "select sum(chargeback_usd) from fct_showback_daily where team = ? "
                        "and not list_contains(?, namespace)", [team, [*SYNTHETIC_LINES, *shared]])[0][0]


def test_chargeback_per_team(world, fleet) -> None:
    wh, shared, team, other, _ = world
    per_team = queries.spend_by_team_daily(wh, ALL, D0, D1, shared).groupby("team")["chargeback_usd"].sum()
    want = {t for t, in _mart(fleet, "select distinct team from fct_showback_daily where not list_contains(?, namespace)",
                              [[*SYNTHETIC_LINES, *shared]])}
    assert set(per_team.index) == want  # not the shared namespaces' team, not (unallocated)/(overhead)
    for t in (team, other):
        assert per_team[t] == pytest.approx(_chargeback(fleet, t, shared))
    assert queries.spend_by_team_daily(wh, ALL, D1, D1 + timedelta(days=1), shared).empty  # no data that day


def test_cost_lines_add_up_to_the_total(world, fleet) -> None:
    wh, shared, *_ = world
    lines = queries.cost_lines_daily(wh, ALL, D0, D1, shared)
    parts = lines[["gpu_usd", "cpu_memory_usd", "shared_usd", "unallocated_usd"]].sum(axis=1)
    assert (parts - lines["total_usd"]).abs().max() < 1e-9
    (total,), = _mart(fleet, "select sum(chargeback_usd) from fct_showback_daily")
    (node_cost,), = _mart(fleet, "select sum(node_cost_usd) from fct_node_hourly")
    assert lines["total_usd"].sum() == pytest.approx(total) and total > node_cost  # + the fixed overhead
    assert lines["node_cost_usd"].sum() == pytest.approx(node_cost)
    # charged to the teams + the shared namespaces' own lines + unrecovered (unallocated) = total
    (own_shared,), = _mart(fleet, "select coalesce(sum(chargeback_usd), 0) from fct_showback_daily "
                                  "where list_contains(?, namespace) or namespace = '(overhead)'", [list(shared)])
    assert lines["charged_to_teams_usd"].sum() + lines["unallocated_usd"].sum() + own_shared == pytest.approx(total)


def test_team_lead_scope_filters_every_team_query(world) -> None:
    wh, shared, team, other, _ = world
    scope = Scope.of_teams([team])
    assert list(queries.teams(wh, scope)["team"]) == [team]
    for frame in (
        queries.spend_by_team_daily(wh, scope, D0, D1, shared),
        queries.team_totals(wh, scope, D0, D1),
        queries.team_daily(wh, scope, D0, D1),
        queries.idle_workloads(wh, scope, D0, D1),
        queries.team_namespaces(wh, scope),
    ):
        assert not frame.empty and set(frame["team"]) == {team}
    # a narrowed scope cannot reach another team
    assert queries.team_totals(wh, scope.narrow([other]), D0, D1).empty


@pytest.mark.parametrize("name", ["cost_lines_daily", "capacity_hourly", "node_allocation", "stranded_gpus",
                                  "pending_gpu_pods", "bill_reconciliation"])
def test_fleet_queries_refuse_team_scope(world, name) -> None:
    wh, shared, team, *_ = world
    args = {"cost_lines_daily": (D0, D1, shared), "capacity_hourly": (D0, D1),
            "bill_reconciliation": (D0, D1), "pending_gpu_pods": (D0, D1)}.get(name, ())
    with pytest.raises(AccessDenied):
        getattr(queries, name)(wh, Scope.of_teams([team]), *args)


def test_team_totals_idle_pct_over_measured_hours(world, fleet) -> None:
    wh, shared, team, *_ = world
    row = queries.team_totals(wh, Scope.of_teams([team]), D0, D1).iloc[0]
    (gpu_h, idle_h, measured_h), = _mart(fleet, "select sum(gpu_hours), sum(idle_gpu_hours), sum(measured_gpu_hours) "
                                                "from fct_workload_daily where team = ?", [team])
    assert row["gpu_hours"] == pytest.approx(gpu_h)
    assert row["idle_pct"] == pytest.approx(idle_h / measured_h)
    assert row["chargeback_usd"] == pytest.approx(_chargeback(fleet, team, ()))


def test_idle_workloads_rank_and_sparkline(world, fleet) -> None:
    wh, *_ = world
    idle = queries.idle_workloads(wh, ALL, D0, D1, limit=3)
    want = _mart(fleet, "select workload, sum(idle_cost_usd) from fct_workload_daily where gpu_hours > 0 "
                        "group by cluster, namespace, team, workload_kind, workload order by 2 desc, 1 limit 3")
    assert list(zip(idle["workload"], idle["idle_cost_usd"], strict=True)) == [
        (w, pytest.approx(c)) for w, c in want]
    spark = list(idle.iloc[0]["utilisation_pct"])
    assert 0 < len(spark) <= 24 and all(0 <= v <= 100 for v in spark)  # one point per hour of the day


def test_idle_workloads_long_window_has_a_point_per_day(world) -> None:
    wh, *_ = world
    week = queries.idle_workloads(wh, ALL, D0, D0 + timedelta(days=queries.SPARKLINE_DAILY_FROM_DAYS), limit=3)
    short = queries.idle_workloads(wh, ALL, D0, D1, limit=3)
    # same totals (the data has one day) from the daily mart; the sparkline is per day now
    cols = ["workload", "gpu_hours", "idle_cost_usd", "cost_usd", "idle_pct"]
    assert week[cols].to_dict("records") == short[cols].to_dict("records")
    assert all(len(list(s)) == 1 for s in week["utilisation_pct"])


def test_capacity_and_heatmap_inputs(world, fleet) -> None:
    wh, *_ = world
    cap = queries.capacity_hourly(wh, ALL, D0, D1)
    want = dict(((str(c), h.replace(tzinfo=None) if h.tzinfo is None else h), u) for c, h, u in _mart(
        fleet, "select cluster, hour::timestamp, sum(utilized_gpu_hours) from fct_node_hourly group by all"))
    assert len(cap) == len(want) == 48  # 2 clusters x 24 hours
    for r in cap.itertuples():
        assert r.gpu_utilized == pytest.approx(want[(r.cluster, r.hour.to_pydatetime())])
    nodes = queries.node_allocation(wh, ALL)
    latest = dict(_mart(fleet, "select node, allocated_gpu_hours from fct_node_hourly where gpu_capacity > 0 "
                               "and hour = (select max(hour) from fct_node_hourly)"))
    assert dict(zip(nodes["node"], nodes["gpu_allocated"], strict=True)) == pytest.approx(latest)


def test_pending_gpu_pods(world, fleet) -> None:
    wh, *_ = world
    pending = queries.pending_gpu_pods(wh, ALL, D0, D1)
    (want,), = _mart(fleet, "select sum(pending_gpu_pods) from fct_cluster_capacity_hourly")
    assert len(pending) == 48 and pending["pending_gpu_pods"].sum() == want


def test_bill_reconciliation_rows(world, fleet) -> None:
    wh, *_ = world
    bill = queries.bill_reconciliation(wh, ALL, D0, D1)
    want = dict(_mart(fleet, "select status, count(*) from fct_bill_reconciliation_daily group by 1"))
    assert want and bill["status"].value_counts().to_dict() == want


def test_teams_list_leaves_out_the_synthetic_lines(world) -> None:
    wh, *_ = world
    assert not set(queries.team_namespaces(wh, ALL)["namespace"]) & set(SYNTHETIC_LINES)
    assert len(queries.teams(wh, ALL)) > 2


def test_recommendations_scoped_by_namespace(world) -> None:
    wh, _, team, other, _ = world
    # rec_old is resolved: kept by the recommender for history, not shown
    assert set(queries.recommendations(wh, ALL)["id"]) == {"rec_t", "rec_o", "rec_p"}
    assert set(queries.recommendations(wh, Scope.of_teams([team]))["id"]) == {"rec_t"}
    assert list(queries.recommendations(wh, ALL, kinds=("consolidate_nodes",))["id"]) == ["rec_p"]
    assert queries.recommendations(wh, Scope.of_teams([team]).narrow([other])).empty


def test_recommendations_absent_table_is_none(fleet, tmp_path) -> None:
    wh = queries.Warehouse.of(fleet.warehouse, f"sqlite:///{tmp_path / 'empty.db'}")
    assert queries.recommendations(wh, ALL) is None


def test_raw_queries_run_on_any_cursor(world, fleet) -> None:
    wh, _, team, *_ = world
    con = duckdb.connect(wh.path, read_only=True)
    try:
        df = queries.RAW["team_totals"](con.cursor(), Scope.of_teams([team]), D0, D1)
    finally:
        con.close()
    assert df.iloc[0]["chargeback_usd"] == pytest.approx(_chargeback(fleet, team, ()))


def test_a_published_build_is_seen_by_the_next_query(fleet_copy) -> None:
    """The reader and the query cache follow the published version: a build that publishes while the
    dashboards run is read by the next query, never answered from the old build's cache."""
    import shutil

    import duckdb

    from gpufinops.warehouse import live_file, versions_dir
    from transform.publish import publish

    path = fleet_copy.warehouse
    wh = queries.Warehouse.of(path)
    with queries.cursor(wh) as cur:
        n_teams = cur.execute("select count(*) from dim_team").fetchone()[0]
    before = set(queries.teams(wh, ALL)["team"])
    renamed = sorted(before)[0]
    new = versions_dir(path) / "20990101T000000000000Z.duckdb"
    shutil.copyfile(live_file(path), new)
    con = duckdb.connect(str(new))
    con.execute("update fct_showback_daily set team = 'gamma' where team = ?", [renamed])
    con.execute("insert into dim_team select * replace ('gamma' as team) from dim_team limit 1")
    con.close()
    publish(path, new)  # while this process holds the old file open
    with queries.cursor(wh) as cur:
        assert cur.execute("select count(*) from dim_team").fetchone()[0] == n_teams + 1
    after = set(queries.teams(wh, ALL)["team"])
    assert "gamma" not in before
    assert "gamma" in after and renamed not in after
