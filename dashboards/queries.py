"""The dashboards' side of the read model: ``gpufinops.views.queries`` behind Streamlit's cache.

``queries.<name>(warehouse, scope, ...)`` runs ``RAW[<name>]`` behind ``st.cache_data(ttl=...)`` on a
cursor of the process's ``gpufinops.warehouse.Reader`` (held by ``st.cache_resource``). The reader
moves to a newly published build between queries, and the cache keys on the published version, so a
page never mixes two builds' numbers and sees a new build as soon as it is published.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import streamlit as st

from gpufinops.views.queries import RAW, SPARKLINE_DAILY_FROM_DAYS, SYNTHETIC_LINES, recommendations_raw
from gpufinops.views.scope import Scope
from gpufinops.warehouse import Reader, published_version

__all__ = [
    "Warehouse",
    "RAW",
    "CACHE_TTL_S",
    "SYNTHETIC_LINES",
    "SPARKLINE_DAILY_FROM_DAYS",
    "cursor",
    "recommendations",
    "recommendations_raw",
    "clear_caches",
    "data_window",
    "teams",
    "team_namespaces",
    "spend_by_team_daily",
    "cost_lines_daily",
    "bill_reconciliation",
    "team_totals",
    "team_daily",
    "idle_workloads",
    "capacity_hourly",
    "node_allocation",
    "stranded_gpus",
    "pending_gpu_pods",
    "budget_run_rates",
    "budget_status",
    "change_outcomes",
    "savings_realized",
    "change_calibration",
]

CACHE_TTL_S = int(os.environ.get("GPUFINOPS_DASHBOARD_CACHE_TTL_S", "300"))


@dataclass(frozen=True)
class Warehouse:
    """Where the marts are (hashable, so it is part of every cache key)."""

    path: str
    app_db_url: str | None = None

    @classmethod
    def of(cls, path: Path | str, app_db_url: str | None = None) -> Warehouse:
        return cls(path=os.path.abspath(path), app_db_url=app_db_url)


@st.cache_resource(on_release=Reader.close, show_spinner=False)
def _reader(path: str) -> Reader:
    return Reader(path)


@contextmanager
def cursor(warehouse: Warehouse) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor (UTC) on the live published version."""
    with _reader(warehouse.path).cursor() as cur:
        yield cur


def clear_caches() -> None:
    st.cache_data.clear()
    _reader.clear()


def _cached(name: str) -> Callable[..., pd.DataFrame]:
    fn = RAW[name]

    def run(warehouse: Warehouse, version: str | None, *args: Any, **kwargs: Any) -> pd.DataFrame:
        with cursor(warehouse) as cur:
            return fn(cur, *args, **kwargs)

    # distinct names so that st.cache_data keys each query apart (nested functions share a key otherwise)
    run.__name__ = run.__qualname__ = name
    cached = st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=256)(run)

    def query(warehouse: Warehouse, *args: Any, **kwargs: Any) -> pd.DataFrame:
        # the published version is part of the key: a new build is never answered from the old one's cache
        return cached(warehouse, published_version(warehouse.path), *args, **kwargs)

    query.__name__ = query.__qualname__ = name
    query.__doc__ = fn.__doc__
    return query


data_window = _cached("data_window")
teams = _cached("teams")
team_namespaces = _cached("team_namespaces")
spend_by_team_daily = _cached("spend_by_team_daily")
cost_lines_daily = _cached("cost_lines_daily")
bill_reconciliation = _cached("bill_reconciliation")
team_totals = _cached("team_totals")
team_daily = _cached("team_daily")
idle_workloads = _cached("idle_workloads")
capacity_hourly = _cached("capacity_hourly")
node_allocation = _cached("node_allocation")
stranded_gpus = _cached("stranded_gpus")
pending_gpu_pods = _cached("pending_gpu_pods")
budget_run_rates = _cached("budget_run_rates")


def budget_status(warehouse: Warehouse, scope: Scope, as_of: date | None, budgets_file: Path,
                  thresholds: tuple[float, ...]) -> pd.DataFrame:
    """Team budgets (the budgets file) and registered workloads' budgets against fct_budget_run_rate_daily
    (``gpufinops.views.budgets.evaluate``): the status table; ``breach`` names the breached bases."""
    return _budget_status(warehouse, published_version(warehouse.path), scope, as_of, str(budgets_file), thresholds)


@st.cache_data(ttl=60, show_spinner=False)
def _budget_status(warehouse: Warehouse, version: str | None, scope: Scope, as_of: date | None, budgets_file: str,
                   thresholds: tuple[float, ...]) -> pd.DataFrame:
    from gpufinops.views.budgets import BudgetSettings, evaluate

    with cursor(warehouse) as cur:
        status, _ = evaluate(cur, scope, BudgetSettings(budgets_file=Path(budgets_file),
                                                        budget_alert_thresholds=list(thresholds)),
                             warehouse.app_db_url, as_of)
    return status
change_outcomes = _cached("change_outcomes")
savings_realized = _cached("savings_realized")
change_calibration = _cached("change_calibration")


def recommendations(warehouse: Warehouse, scope: Scope, kinds: tuple[str, ...] | None = None) -> pd.DataFrame | None:
    """Recommendations the viewer may see, or None when the recommender has not written its table yet."""
    return _recommendations(warehouse, published_version(warehouse.path), scope, kinds)


@st.cache_data(ttl=60, show_spinner=False)
def _recommendations(warehouse: Warehouse, version: str | None, scope: Scope,
                     kinds: tuple[str, ...] | None) -> pd.DataFrame | None:
    with cursor(warehouse) as cur:
        return recommendations_raw(cur, scope, warehouse.app_db_url, kinds)
