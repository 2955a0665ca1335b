"""The query layer on a mini warehouse with known numbers: figures, conservation, scoping."""

from __future__ import annotations

import importlib.util
from datetime import date, timedelta
from pathlib import Path

import pytest

from dashboards import queries
from gpufinops.views.scope import AccessDenied, Scope


def _support():
    spec = importlib.util.spec_from_file_location("dash_support", Path(__file__).parent / "fixtures/dashboards/support.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


support = _support()
D0, D1 = date(2026, 11, 1), date(2026, 11, 3)
ALL = Scope.everything()
ALPHA = Scope.of_teams(["alpha"])
SHARED = ("kube-system",)


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> queries.Warehouse:
    home = tmp_path_factory.mktemp("wh")
    path = support.build_warehouse(home)
    return queries.Warehouse.of(path, support.build_app_db(home))


def test_chargeback_per_team(wh) -> None:
    spend = queries.spend_by_team_daily(wh, ALL, D0, D1, SHARED)
    per_team = spend.groupby("team")["chargeback_usd"].sum()
    assert set(per_team.index) == {"alpha", "beta"}  # not kube-system's team, not (unallocated)/(overhead)
    assert per_team["alpha"] == pytest.approx(support.ALPHA_CHARGEBACK)
    assert per_team["beta"] == pytest.approx(support.BETA_CHARGEBACK)
    # one day only
    assert queries.spend_by_team_daily(wh, ALL, D0, date(2026, 11, 2), SHARED)["chargeback_usd"].sum() == pytest.approx(
        (support.ALPHA_CHARGEBACK + support.BETA_CHARGEBACK) / 2
    )


def test_cost_lines_add_up_to_the_total(wh) -> None:
    lines = queries.cost_lines_daily(wh, ALL, D0, D1, SHARED)
    parts = lines[["gpu_usd", "cpu_memory_usd", "shared_usd", "unallocated_usd"]].sum(axis=1)
    assert (parts - lines["total_usd"]).abs().max() < 1e-9
    assert lines["total_usd"].sum() == pytest.approx(support.NODE_COST + support.OVERHEAD)
    assert lines["node_cost_usd"].sum() == pytest.approx(support.NODE_COST)
    assert lines["gpu_usd"].sum() == pytest.approx(48 * (14.4 + 3.6 + 9.0))
    assert lines["shared_usd"].sum() == pytest.approx(48 * (0.3 + 0.1))
    # charged to the teams + unrecovered (unallocated) = total
    assert lines["charged_to_teams_usd"].sum() == pytest.approx(support.ALPHA_CHARGEBACK + support.BETA_CHARGEBACK)
    assert lines["charged_to_teams_usd"].sum() + lines["unallocated_usd"].sum() == pytest.approx(lines["total_usd"].sum())


def test_team_lead_scope_filters_every_team_query(wh) -> None:
    assert list(queries.teams(wh, ALPHA)["team"]) == ["alpha"]
    for frame in (
        queries.spend_by_team_daily(wh, ALPHA, D0, D1, SHARED),
        queries.team_totals(wh, ALPHA, D0, D1),
        queries.team_daily(wh, ALPHA, D0, D1),
        queries.idle_workloads(wh, ALPHA, D0, D1),
        queries.team_namespaces(wh, ALPHA),
    ):
        assert not frame.empty and set(frame["team"]) == {"alpha"}
    # a narrowed scope cannot reach another team
    assert queries.team_totals(wh, ALPHA.narrow(["beta"]), D0, D1).empty


@pytest.mark.parametrize("name", ["cost_lines_daily", "capacity_hourly", "node_allocation", "stranded_gpus",
                                  "pending_gpu_pods", "bill_reconciliation"])
def test_fleet_queries_refuse_team_scope(wh, name) -> None:
    args = {"cost_lines_daily": (D0, D1, SHARED), "capacity_hourly": (D0, D1),
            "bill_reconciliation": (D0, D1), "pending_gpu_pods": (D0, D1)}.get(name, ())
    with pytest.raises(AccessDenied):
        getattr(queries, name)(wh, ALPHA, *args)


def test_team_totals_idle_pct_over_measured_hours(wh) -> None:
    row = queries.team_totals(wh, ALPHA, D0, D1).iloc[0]
    assert row["gpu_hours"] == pytest.approx(48 * 5)
    assert row["idle_pct"] == pytest.approx(1 - (4 * 0.25 + 1 * 0.10) / 5)
    assert row["chargeback_usd"] == pytest.approx(support.ALPHA_CHARGEBACK)


def test_idle_workloads_rank_and_sparkline(wh) -> None:
    idle = queries.idle_workloads(wh, ALL, D0, D1, limit=2)
    assert list(idle["workload"]) == ["train-a", "notebook-a"]  # by idle cost: 518.40, 155.52 (serve-b 43.20)
    assert idle.iloc[0]["idle_cost_usd"] == pytest.approx(48 * 14.4 * 0.75)
    spark = list(idle.iloc[0]["utilisation_pct"])
    assert len(spark) == 48 and set(spark) == {25.0}


def test_idle_workloads_long_window_has_a_point_per_day(wh) -> None:
    week = queries.idle_workloads(wh, ALL, D0, D0 + timedelta(days=queries.SPARKLINE_DAILY_FROM_DAYS), limit=3)
    short = queries.idle_workloads(wh, ALL, D0, D1, limit=3)
    # same totals (the data has two days) from the daily mart; the sparkline is per day now
    cols = ["workload", "gpu_hours", "idle_cost_usd", "cost_usd", "idle_pct"]
    assert week[cols].to_dict("records") == short[cols].to_dict("records")
    assert dict(zip(week["workload"], week["utilisation_pct"].map(list), strict=True)) == {
        "train-a": [25.0, 25.0], "notebook-a": [10.0, 10.0], "serve-b": [90.0, 90.0]}


def test_capacity_and_heatmap_inputs(wh) -> None:
    cap = queries.capacity_hourly(wh, ALL, D0, D1)
    assert len(cap) == 48
    assert cap["gpu_utilized"].iloc[0] == pytest.approx(4 * 0.25 + 0.1 + 2 * 0.9)
    assert cap["binpack_efficiency"].iloc[0] == pytest.approx(0.5)
    nodes = queries.node_allocation(wh, ALL)
    assert dict(zip(nodes["node"], nodes["gpu_allocated"], strict=True)) == {"n1": 5.0, "n2": 2.0}


def test_pending_gpu_pods(wh) -> None:
    pending = queries.pending_gpu_pods(wh, ALL, D0, D1)
    assert len(pending) == 48 and set(pending["pending_gpu_pods"]) == {3}


def test_bill_reconciliation_rows(wh) -> None:
    bill = queries.bill_reconciliation(wh, ALL, D0, D1)
    assert bill["status"].value_counts().to_dict() == {"matched": 3, "mismatch": 1, "unmatched_bill_line": 1}


def test_teams_list_leaves_out_the_synthetic_lines(wh) -> None:
    assert list(queries.teams(wh, ALL)["team"]) == ["platform", "beta", "alpha"]  # by tenant, then team
    assert "(unallocated)" not in set(queries.team_namespaces(wh, ALL)["namespace"])


def test_recommendations_scoped_by_namespace(wh) -> None:
    # rec_old is resolved: kept by the recommender for history, not shown
    assert set(queries.recommendations(wh, ALL)["id"]) == {"rec_a1", "rec_a2", "rec_b1", "rec_p1"}
    assert set(queries.recommendations(wh, ALPHA)["id"]) == {"rec_a1", "rec_a2"}
    assert list(queries.recommendations(wh, ALL, kinds=("consolidate_nodes",))["id"]) == ["rec_p1"]
    assert queries.recommendations(wh, ALPHA.narrow(["beta"])).empty


def test_recommendations_absent_table_is_none(tmp_path) -> None:
    path = support.build_warehouse(tmp_path)
    wh = queries.Warehouse.of(path, f"sqlite:///{tmp_path / 'empty.db'}")
    assert queries.recommendations(wh, ALL) is None


def test_raw_queries_run_on_any_cursor(wh) -> None:
    import duckdb

    con = duckdb.connect(wh.path, read_only=True)
    try:
        df = queries.RAW["team_totals"](con.cursor(), ALPHA, D0, D1)
    finally:
        con.close()
    assert df.iloc[0]["chargeback_usd"] == pytest.approx(support.ALPHA_CHARGEBACK)


def test_a_published_build_is_seen_by_the_next_query(tmp_path) -> None:
    """The reader and the query cache follow the published version: a build that publishes while the
    dashboards run is read by the next query, never answered from the old build's cache."""
    import shutil

    import duckdb

    from gpufinops.warehouse import live_file, versions_dir
    from transform.publish import publish

    path = support.build_warehouse(tmp_path)  # a plain file, as before the first published build
    wh = queries.Warehouse.of(path)
    with queries.cursor(wh) as cur:
        assert cur.execute("select count(*) from dim_team").fetchone()[0] == 3
    before = set(queries.teams(wh, ALL)["team"])
    new = versions_dir(path) / "20990101T000000000000Z.duckdb"
    new.parent.mkdir()
    shutil.copyfile(live_file(path), new)
    con = duckdb.connect(str(new))
    con.execute("update fct_showback_daily set team = 'gamma' where team = 'beta'")
    con.execute("insert into dim_team values ('gamma', 'x')")
    con.close()
    publish(path, new)  # while this process holds the old file open
    with queries.cursor(wh) as cur:
        assert cur.execute("select count(*) from dim_team").fetchone()[0] == 4
    after = set(queries.teams(wh, ALL)["team"])
    assert "beta" in before and "gamma" not in before
    assert "gamma" in after and "beta" not in after
