"""Forecast, budget status and budgets file: pure functions on small frames."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from gpufinops.errors import InputError
from gpufinops.views.budgets import budget_status, load_budgets, month_forecast


def _daily(values: dict[str, float], team: str = "a") -> pd.DataFrame:
    return pd.DataFrame({"day": [date.fromisoformat(d) for d in values], "team": team,
                         "chargeback_usd": list(values.values())})


def test_forecast_uses_the_last_seven_days_and_ignores_other_months() -> None:
    days = {f"2026-11-{d:02d}": 10.0 for d in range(1, 4)} | {f"2026-11-{d:02d}": 30.0 for d in range(4, 11)}
    days["2026-10-31"] = 1000.0  # last month: neither month to date nor run rate
    fc = month_forecast(_daily(days), date(2026, 11, 10))
    assert fc.month_to_date == pytest.approx(3 * 10 + 7 * 30)
    assert fc.run_rate_per_day == pytest.approx(30.0)
    assert fc.days_left == 20
    assert fc.forecast == pytest.approx(240 + 20 * 30)


def test_budget_status_levels() -> None:
    daily = pd.concat([_daily({"2026-11-01": 100.0}, "a"), _daily({"2026-11-01": 10.0}, "b"),
                       _daily({"2026-11-01": 900.0}, "c")])
    status = budget_status(daily, {"a": 4000.0, "b": 1000.0, "c": 800.0, "d": 50.0}, date(2026, 11, 1)).set_index("team")
    # a: forecast 100 × 30 = 3000 = 75% -> no alert; b: 300 -> none; c: actual 900 > 800 -> actual ≥ 100%
    assert status.loc["a", "alert"] == "" and status.loc["b", "alert"] == ""
    assert status.loc["c", "alert"] == "actual ≥ 100% of budget"
    assert status.loc["d", "month_to_date_usd"] == 0.0  # a budget without spend still shows
    daily_a = _daily({"2026-11-01": 110.0}, "a")
    assert budget_status(daily_a, {"a": 4000.0}, date(2026, 11, 1)).loc[0, "alert"] == "forecast ≥ 80% of budget"


def test_budgets_file(tmp_path) -> None:
    path = tmp_path / "b.csv"
    assert load_budgets(path) == {}
    path.write_text("team,monthly_budget_usd\nalpha,100.5\n")
    assert load_budgets(path) == {"alpha": 100.5}
    path.write_text("team,monthly_budget_usd\nalpha,lots\n")
    with pytest.raises(InputError, match="row 2"):
        load_budgets(path)
