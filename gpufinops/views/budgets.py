"""Budgets and their breaches, for the dashboards, the API, the reports and the breach notices.

Where the budgets come from: team budgets (monthly USD) from the budgets file of the ``dashboards:``
settings; workload budgets (USD per day) from ``POST /v1/workloads`` (``budget_usd_day`` in the app DB's
``workloads`` table). What they are checked against comes from the warehouse: spend, month to date, the
trailing run rate and the month-end forecast of ``fct_budget_run_rate_daily`` (the one place those are
computed; models/README.md "Budgets"). This module only compares:

- a **run-rate breach**: ``run_rate_usd_day`` > the daily budget;
- a **forecast breach**: ``forecast_month_end_usd`` > the monthly budget.

A team's daily budget is its monthly budget / the days of the month; a workload's monthly budget is its
daily budget × the days of the month (``days_in_month`` of the mart). ``alert`` in the status table keeps
the finance thresholds (``budget_alert_thresholds``, e.g. 80 % and 100 % of the monthly budget, actual or
forecast), which warn before a breach.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal

import duckdb
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import Engine, select

from gpufinops.errors import ConfigError, InputError
from gpufinops.settings import Settings, config_section
from gpufinops.views.queries import RAW
from gpufinops.views.scope import Scope

__all__ = ["BudgetSettings", "load_budget_settings", "load_budgets", "DEFAULT_BUDGETS", "Budget",
           "Breach", "team_budgets", "workload_budgets", "run_rates", "budget_status", "breaches",
           "fleet_forecast", "Forecast", "STATUS_COLUMNS", "evaluate"]

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


@dataclass(frozen=True)
class Budget:
    """One budget: a team's (monthly) or a registered workload's (daily)."""

    scope_kind: Literal["team", "workload"]
    scope_id: str  # the mart's scope_id: team:<team> | workload:<cluster>/<namespace>/<kind>/<name>
    team: str | None
    label: str
    usd_month: float | None = None  # team budgets
    usd_day: float | None = None  # workload budgets
    workload_id: str | None = None


def team_budgets(path: Path) -> list[Budget]:
    return [Budget("team", f"team:{team}", team, team, usd_month=amount)
            for team, amount in sorted(load_budgets(path).items())]


def workload_budgets(app_db: Engine | str | None) -> list[Budget]:
    """The registered workloads with a ``budget_usd_day``: none without an app DB (an engine or a URL;
    a URL is only read, never migrated or created)."""
    if app_db is None or app_db == "":
        return []
    import sqlalchemy as sa

    from gpufinops.appdb.schema import workloads

    engine = sa.create_engine(app_db) if isinstance(app_db, str) else app_db
    try:
        if not sa.inspect(engine).has_table("workloads"):
            return []
        with engine.connect() as conn:
            rows = conn.execute(select(workloads).where(workloads.c.budget_usd_day.is_not(None))).mappings().all()
    except sa.exc.OperationalError:
        return []
    finally:
        if isinstance(app_db, str):
            engine.dispose()
    return [Budget("workload", f"workload:{r['cluster']}/{r['namespace']}/{r['kind']}/{r['name']}", r["team"],
                   f"{r['namespace']}/{r['kind']}/{r['name']}", usd_day=float(r["budget_usd_day"]),
                   workload_id=r["id"])
            for r in sorted(rows, key=lambda r: r["id"])]


def run_rates(cur: duckdb.DuckDBPyConnection, scope: Scope, as_of: date | None = None) -> pd.DataFrame:
    """The mart's rows on ``as_of`` (default: its last day) that the viewer may see."""
    return RAW["budget_run_rates"](cur, scope, as_of)


STATUS_COLUMNS = ["scope_kind", "scope_id", "team", "label", "workload_id", "day", "budget_usd_day",
                  "monthly_budget_usd", "spend_usd", "month_to_date_usd", "run_rate_usd_day", "forecast_usd",
                  "days_left", "pct_of_budget_actual", "pct_of_budget_forecast", "alert", "breach"]


def _ratio(value: float, budget: float) -> float | None:
    return value / budget if budget > 0 else None


def budget_status(rates: pd.DataFrame, budgets: Iterable[Budget], scope: Scope,
                  thresholds: Sequence[float] = (0.8, 1.0), as_of: date | None = None) -> pd.DataFrame:
    """Per budget the viewer may see: the budget (per day and per month), the mart's figures on the day,
    the highest alert threshold crossed (``alert``) and the breach bases (``breach``: run_rate, forecast).

    A budget whose scope spent nothing this month (no mart row) shows zeros."""
    by_id = {r["scope_id"]: r for r in rates.to_dict("records")}
    day = as_of or (max(r["day"] for r in by_id.values()) if by_id else None)
    dim = next((int(r["days_in_month"]) for r in by_id.values()), None)
    rows = []
    for b in budgets:
        if scope.teams is not None and (b.team is None or not scope.allows_team(b.team)):
            continue  # a budget of no known team is finance's and the admins' only
        r = by_id.get(b.scope_id, {})
        days_in_month = int(r.get("days_in_month") or dim or 30)
        per_month = b.usd_month if b.usd_month is not None else float(b.usd_day or 0) * days_in_month
        per_day = b.usd_day if b.usd_day is not None else per_month / days_in_month
        mtd = float(r.get("month_to_date_usd") or 0.0)
        run_rate = float(r.get("run_rate_usd_day") or 0.0)
        forecast = float(r.get("forecast_month_end_usd") or mtd)
        pct_actual, pct_forecast = _ratio(mtd, per_month), _ratio(forecast, per_month)
        crossed = [t for t in thresholds if per_month > 0 and max(pct_actual or 0, pct_forecast or 0) >= t]
        alert = ""
        if crossed:
            top = max(crossed)
            alert = f"{'actual' if (pct_actual or 0) >= top else 'forecast'} ≥ {top:.0%} of budget"
        breach = [basis for basis, over in (("run_rate", run_rate > per_day), ("forecast", forecast > per_month)) if over]
        rows.append({
            "scope_kind": b.scope_kind, "scope_id": b.scope_id, "team": b.team, "label": b.label,
            "workload_id": b.workload_id, "day": r.get("day", day), "budget_usd_day": per_day,
            "monthly_budget_usd": per_month, "spend_usd": float(r.get("spend_usd") or 0.0),
            "month_to_date_usd": mtd, "run_rate_usd_day": run_rate, "forecast_usd": forecast,
            "days_left": r.get("days_left"), "pct_of_budget_actual": pct_actual,
            "pct_of_budget_forecast": pct_forecast, "alert": alert, "breach": ", ".join(breach),
        })
    return pd.DataFrame(rows, columns=STATUS_COLUMNS)


@dataclass(frozen=True)
class Breach:
    """A budget exceeded on one day by its run rate or its forecast."""

    day: date
    scope_kind: str
    scope_id: str
    team: str | None
    label: str
    workload_id: str | None
    basis: Literal["run_rate", "forecast"]
    value_usd: float  # the run rate ($/day) or the forecast ($ at month end)
    budget_usd: float  # the daily or the monthly budget it exceeds
    month_to_date_usd: float

    @property
    def id(self) -> str:
        return f"{self.scope_id}|{self.basis}|{self.day.isoformat()}"

    @property
    def text(self) -> str:
        what = (f"run rate ${self.value_usd:,.2f}/day > budget ${self.budget_usd:,.2f}/day"
                if self.basis == "run_rate" else
                f"month-end forecast ${self.value_usd:,.2f} > budget ${self.budget_usd:,.2f}")
        who = f"team {self.team}" if self.scope_kind == "team" else f"workload {self.label} (team {self.team})"
        return f"{who}: {what} on {self.day} (month to date ${self.month_to_date_usd:,.2f})"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["day"] = self.day.isoformat()
        out["id"] = self.id
        out["text"] = self.text
        return out


def breaches(status: pd.DataFrame) -> list[Breach]:
    """The breaches of a ``budget_status`` table."""
    found = []
    for r in status.to_dict("records"):
        if not r["breach"] or r["day"] is None:
            continue
        day = pd.Timestamp(r["day"]).date()
        for basis in r["breach"].split(", "):
            value, budget = ((r["run_rate_usd_day"], r["budget_usd_day"]) if basis == "run_rate"
                             else (r["forecast_usd"], r["monthly_budget_usd"]))
            found.append(Breach(day, r["scope_kind"], r["scope_id"], r["team"], r["label"], r["workload_id"],
                                basis, float(value), float(budget), float(r["month_to_date_usd"])))  # type: ignore[arg-type]
    return found


@dataclass(frozen=True)
class Forecast:
    as_of: date | None
    month_to_date: float
    run_rate_per_day: float
    days_left: int
    forecast: float
    run_rate_days: int


def fleet_forecast(rates: pd.DataFrame) -> Forecast:
    """The fleet row of ``run_rates`` (total cost = node cost + fixed overhead)."""
    fleet = rates[rates["scope_kind"] == "fleet"]
    if fleet.empty:
        return Forecast(None, 0.0, 0.0, 0, 0.0, 0)
    r = fleet.iloc[0]
    return Forecast(pd.Timestamp(r["day"]).date(), float(r["month_to_date_usd"]), float(r["run_rate_usd_day"]),
                    int(r["days_left"]), float(r["forecast_month_end_usd"]), int(r["run_rate_days"]))


def evaluate(cur: duckdb.DuckDBPyConnection, scope: Scope, settings: BudgetSettings, app_db: Engine | str | None,
             as_of: date | None = None) -> tuple[pd.DataFrame, list[Breach]]:
    """Every budget the viewer may see (team budgets file + registered workloads) against the mart on
    ``as_of`` (default: the mart's last day): the status table and its breaches."""
    rates = run_rates(cur, scope, as_of)
    budgets = team_budgets(settings.budgets_file) + workload_budgets(app_db)
    status = budget_status(rates, budgets, scope, settings.budget_alert_thresholds, as_of)
    return status, breaches(status)
