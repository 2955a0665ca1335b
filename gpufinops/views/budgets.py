"""Team budgets for the finance and team views and reports: the budgets file, its settings, and the
month-end forecast and budget status over the marts' daily spend."""

from __future__ import annotations

import calendar
import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpufinops.errors import ConfigError, InputError
from gpufinops.settings import Settings, config_section

__all__ = ["Forecast", "month_forecast", "budget_status", "RUN_RATE_DAYS", "BudgetSettings",
           "load_budget_settings", "load_budgets", "DEFAULT_BUDGETS"]

DEFAULT_BUDGETS = Path(__file__).resolve().parent / "team_budgets.csv"


class BudgetSettings(BaseModel):
    """The budget keys of the ``dashboards:`` config section (the dashboards and the reports read them)."""

    model_config = ConfigDict(extra="ignore")

    budgets_file: Path = DEFAULT_BUDGETS
    # fractions of a monthly budget (actual or forecast) at which a team gets an alert
    budget_alert_thresholds: list[float] = Field(default_factory=lambda: [0.8, 1.0])


def load_budget_settings(settings: Settings) -> BudgetSettings:
    try:
        return BudgetSettings(**config_section(settings, "dashboards"))
    except ValidationError as exc:
        raise ConfigError(f"invalid `dashboards` settings: {exc}") from exc


def load_budgets(path: Path) -> dict[str, float]:
    """Team -> monthly budget in USD. A missing file means no budgets; a bad row is an error."""
    if not path.exists():
        return {}
    budgets: dict[str, float] = {}
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"team", "monthly_budget_usd"} <= set(reader.fieldnames):
            raise InputError(f"{path}: needs the columns team,monthly_budget_usd")
        for lineno, row in enumerate(reader, start=2):
            team = (row["team"] or "").strip()
            try:
                amount = float(row["monthly_budget_usd"])
            except (TypeError, ValueError):
                raise InputError(f"{path} row {lineno}: monthly_budget_usd {row['monthly_budget_usd']!r} is not a number") from None
            if not team or amount < 0:
                raise InputError(f"{path} row {lineno}: needs a team and a budget >= 0")
            budgets[team] = amount
    return budgets

# the run rate is the mean daily spend of the last week of data (fewer days early in a month)
RUN_RATE_DAYS = 7


@dataclass(frozen=True)
class Forecast:
    month_start: date
    as_of: date
    month_to_date: float
    run_rate_per_day: float
    days_left: int
    forecast: float


def _daily_series(daily: pd.DataFrame, value: str) -> pd.Series:
    if daily.empty:
        return pd.Series(dtype=float)
    days = pd.to_datetime(daily["day"]).dt.date
    return daily.groupby(days)[value].sum().sort_index()


def month_forecast(daily: pd.DataFrame, as_of: date, value: str = "chargeback_usd") -> Forecast:
    """Month-to-date spend up to ``as_of`` (inclusive) plus the run rate times the days left."""
    month_start = as_of.replace(day=1)
    series = _daily_series(daily, value)
    mtd = series[(series.index >= month_start) & (series.index <= as_of)] if len(series) else series
    recent = series[(series.index > as_of - timedelta(days=RUN_RATE_DAYS)) & (series.index <= as_of)] if len(series) else series
    run_rate = float(recent.mean()) if len(recent) else 0.0
    days_left = calendar.monthrange(as_of.year, as_of.month)[1] - as_of.day
    total = float(mtd.sum())
    return Forecast(month_start, as_of, total, run_rate, days_left, total + run_rate * days_left)


def budget_status(
    daily_by_team: pd.DataFrame,
    budgets: Mapping[str, float],
    as_of: date,
    thresholds: Sequence[float] = (0.8, 1.0),
) -> pd.DataFrame:
    """Per team: monthly budget, month-to-date, forecast, and the highest threshold crossed.

    ``alert`` names the highest threshold the actual or forecast spend has crossed ("" if none); the
    forecast counts so that a team hears about an overrun before it happens.
    """
    rows = []
    teams = sorted(set(daily_by_team["team"]) if not daily_by_team.empty else set()) or []
    for team in sorted(set(teams) | set(budgets)):
        part = daily_by_team[daily_by_team["team"] == team] if not daily_by_team.empty else daily_by_team
        fc = month_forecast(part, as_of)
        budget = budgets.get(team)
        pct_actual = fc.month_to_date / budget if budget else None
        pct_forecast = fc.forecast / budget if budget else None
        crossed = [t for t in thresholds if budget and max(pct_actual or 0, pct_forecast or 0) >= t]
        alert = ""
        if crossed:
            top = max(crossed)
            basis = "actual" if (pct_actual or 0) >= top else "forecast"
            alert = f"{basis} ≥ {top:.0%} of budget"
        rows.append(
            {
                "team": team,
                "monthly_budget_usd": budget,
                "month_to_date_usd": fc.month_to_date,
                "forecast_usd": fc.forecast,
                "pct_of_budget_actual": pct_actual,
                "pct_of_budget_forecast": pct_forecast,
                "alert": alert,
            }
        )
    cols = ["team", "monthly_budget_usd", "month_to_date_usd", "forecast_usd", "pct_of_budget_actual",
            "pct_of_budget_forecast", "alert"]
    return pd.DataFrame(rows, columns=cols)
