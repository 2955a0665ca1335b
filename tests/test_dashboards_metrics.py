"""Budget status levels on the dbt-built mini world (alpha $481.60/day, beta $243.20/day, 2026-11-01..02),
and the budgets file. The run rate and forecast themselves are the mart's (tests/test_budgets.py)."""

from __future__ import annotations

from datetime import date

import duckdb
import pytest

from gpufinops.errors import InputError
from gpufinops.views.budgets import Budget, budget_status, load_budgets, run_rates
from gpufinops.views.scope import Scope


def _status(mini_fleet, budgets: list[Budget], as_of: date | None = None):
    con = duckdb.connect(str(mini_fleet.warehouse), read_only=True)
    try:
        rates = run_rates(con.cursor(), Scope.everything(), as_of)
    finally:
        con.close()
    return budget_status(rates, budgets, Scope.everything(), (0.8, 1.0), as_of).set_index("label")


def _team(team: str, monthly: float) -> Budget:
    return Budget("team", f"team:{team}", team, team, usd_month=monthly)


def test_budget_status_levels(mini_fleet) -> None:
    status = _status(mini_fleet, [_team("alpha", 15_000.0), _team("beta", 400.0), _team("gamma", 50.0)])
    # alpha: forecast 963.20 + 28 × 481.60 = 14,448 = 96 % of 15,000: an alert, no breach (481.60 < 500/day)
    assert status.loc["alpha", "forecast_usd"] == pytest.approx(14_448.0)
    assert status.loc["alpha", "alert"] == "forecast ≥ 80% of budget" and status.loc["alpha", "breach"] == ""
    # beta: 486.40 spent of 400 -> actual ≥ 100 %, and both breaches
    assert status.loc["beta", "alert"] == "actual ≥ 100% of budget"
    assert status.loc["beta", "breach"] == "run_rate, forecast"
    # a budget without spend still shows, at zero
    assert status.loc["gamma", "month_to_date_usd"] == 0.0 and status.loc["gamma", "breach"] == ""


def test_an_earlier_day_and_a_workload_budget(mini_fleet) -> None:
    serve_b = Budget("workload", "workload:c1/beta-serve/Deployment/serve-b", "beta", "serve-b", usd_day=250.0)
    status = _status(mini_fleet, [serve_b, _team("alpha", 15_000.0)], date(2026, 11, 1))
    # 11-01: serve-b $240 < $250 a day; its month budget is 30 × 250
    assert status.loc["serve-b", "monthly_budget_usd"] == pytest.approx(7_500.0)
    assert status.loc["serve-b", "run_rate_usd_day"] == pytest.approx(240.0)
    assert status.loc["serve-b", "breach"] == ""
    assert status.loc["alpha", "month_to_date_usd"] == pytest.approx(481.6)


def test_budgets_file(tmp_path) -> None:
    path = tmp_path / "b.csv"
    assert load_budgets(path) == {}
    path.write_text("team,monthly_budget_usd\nalpha,100.5\n")
    assert load_budgets(path) == {"alpha": 100.5}
    path.write_text("team,monthly_budget_usd\nalpha,lots\n")
    with pytest.raises(InputError, match="row 2"):
        load_budgets(path)
