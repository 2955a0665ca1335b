"""The budget section of the Finance and Team pages: breaches first, then budget vs actual.

The figures are ``gpufinops.views.budgets.evaluate``'s (team budgets file + the workloads registered
with ``budget_usd_day``, against ``fct_budget_run_rate_daily``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from dashboards import charts
from dashboards.widgets import money, table

__all__ = ["budget_panel"]


def budget_panel(status: pd.DataFrame, budgets_file: Path, key: str = "budget") -> None:
    if status.empty:
        st.info(f"No budgets set. Add `team,monthly_budget_usd` rows to {budgets_file}, or register a "
                "workload with `budget_usd_day` (POST /v1/workloads).")
        return
    breached = status[status["breach"] != ""]
    for row in breached.itertuples():
        who = f"team **{row.label}**" if row.scope_kind == "team" else f"workload **{row.label}** (team {row.team})"
        parts = []
        if "run_rate" in row.breach:
            parts.append(f"run rate {money(row.run_rate_usd_day)}/day > budget {money(row.budget_usd_day)}/day")
        if "forecast" in row.breach:
            parts.append(f"month-end forecast {money(row.forecast_usd)} > budget {money(row.monthly_budget_usd)}")
        st.warning(f"Budget breach — {who}: " + "; ".join(parts), icon=":material/money_off:")
    for row in status[(status["alert"] != "") & (status["breach"] == "")].itertuples():
        st.warning(f"**{row.label}**: {row.alert} — month to date {money(row.month_to_date_usd)}, "
                   f"forecast {money(row.forecast_usd)}, budget {money(row.monthly_budget_usd)}")
    teams = status[status["scope_kind"] == "team"].rename(columns={"label": "team_label"})
    if not teams.empty:
        st.plotly_chart(charts.budget_vs_actual(teams.assign(team=teams["team_label"])), key=f"{key}_chart")
    shown = status[["scope_kind", "label", "team", "budget_usd_day", "monthly_budget_usd", "month_to_date_usd",
                    "run_rate_usd_day", "forecast_usd", "pct_of_budget_forecast", "alert", "breach"]]
    table(shown, f"{key}_vs_actual", column_config={
        "scope_kind": st.column_config.TextColumn("budget of"),
        "label": st.column_config.TextColumn("team / workload"),
        "budget_usd_day": st.column_config.NumberColumn("budget / day", format="dollar"),
        "monthly_budget_usd": st.column_config.NumberColumn("budget / month", format="dollar"),
        "month_to_date_usd": st.column_config.NumberColumn("month to date", format="dollar"),
        "run_rate_usd_day": st.column_config.NumberColumn("run rate / day", format="dollar"),
        "forecast_usd": st.column_config.NumberColumn("month-end forecast", format="dollar"),
        "pct_of_budget_forecast": st.column_config.NumberColumn("forecast % of budget", format="percent"),
    })
