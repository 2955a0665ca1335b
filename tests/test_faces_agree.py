"""One number, every face: for a workload with unmeasured hours, the API's cost endpoint, the team
page's queries, the team report and `fct_showback_daily` give the same GPU-hours, cost and idle %.

On the hand-made `small_fleet` lake: workload `train` (Job) is alone in team `pod-team` (its pod label)
and holds 1 GPU for 3 hours, of which the last has no DCGM samples (unmeasured). Idle % is over the
2 measured hours only (utilisation 0.5 -> idle 50 %), not over all 3.
"""

from __future__ import annotations

from datetime import date, timedelta

import duckdb
import pytest

from api.warehouse import WarehouseReader
from gpufinops.views.budgets import BudgetSettings
from gpufinops.views.queries import RAW
from gpufinops.views.scope import Scope
from gpufinops.warehouse import connect
from reports.build import build_report

TEAM = "pod-team"
DAY = date(2026, 11, 2)


def test_api_team_page_report_and_showback_mart_agree(small_fleet) -> None:
    con = duckdb.connect(str(small_fleet.warehouse), read_only=True)
    (cluster, ns, kind, name), = con.execute(
        "select cluster, namespace, workload_kind, workload from dim_workload where team = ?", [TEAM]).fetchall()
    mart = con.execute(
        "select sum(gpu_hours), sum(direct_cost_usd), idle_pct(sum(idle_gpu_hours), sum(measured_gpu_hours)), "
        "sum(measured_gpu_hours) from fct_showback_daily where team = ?", [TEAM]).fetchone()
    con.close()
    gpu_hours, cost, idle_pct, measured = mart
    # worked by hand: 1 GPU x 3 h, 2 of them measured at utilisation 0.5
    assert gpu_hours == pytest.approx(3.0, abs=1e-9) and measured == pytest.approx(2.0, abs=1e-9)
    assert idle_pct == pytest.approx(0.5, abs=1e-9)

    api = WarehouseReader(small_fleet.warehouse).workload_cost(cluster, ns, kind, name, timedelta(days=7))
    assert api["gpu_hours"] == round(gpu_hours, 3) and api["cost_usd"] == round(cost, 2)
    assert api["idle_pct"] == round(idle_pct, 4) and api["unmeasured_gpu_hours"] == pytest.approx(1.0)

    scope = Scope.of_teams([TEAM])
    with connect(small_fleet.warehouse) as wh:
        cur = wh.cursor()
        totals = RAW["team_totals"](cur, scope, DAY, DAY + timedelta(days=1)).set_index("team").loc[TEAM]
        idle = RAW["idle_workloads"](cur, scope, DAY, DAY + timedelta(days=1), 10)
        report = build_report(wh, small_fleet.settings, BudgetSettings(), "weekly", f"team:{TEAM}", as_of=DAY)
    row = idle[(idle.workload == name) & (idle.workload_kind == kind)].iloc[0]
    rep = report.tables[f"team_{TEAM}_idle_workloads"]
    rep = rep[rep.workload == name].iloc[0]
    for face in (totals, row, rep):
        assert abs(face["gpu_hours"] - gpu_hours) < 1e-9
        assert abs(face["idle_pct"] - idle_pct) < 1e-9
    for face_cost in (totals["direct_cost_usd"], row["cost_usd"], rep["cost_usd"]):
        assert abs(face_cost - cost) < 1e-9
    assert abs(report.totals["gpu_hours"] - gpu_hours) < 1e-9
