"""What applied changes really saved (fct_change_outcomes and the marts beside it): the Finance page's
"savings realized this month" with the calibration per recommendation kind, and the Approvals page's
history of applied changes with one change's outcome. Layout only; every number is the warehouse's."""

from __future__ import annotations

from datetime import date

import pandas as pd
import streamlit as st

from dashboards import queries
from dashboards.identity import Scope
from dashboards.widgets import money, pct

__all__ = ["savings_realized_panel", "outcomes_history", "change_outcome_panel"]

_FORMATS = {
    "cost_before_usd": st.column_config.NumberColumn("cost before", format="dollar"),
    "cost_after_usd": st.column_config.NumberColumn("cost after", format="dollar"),
    "est_monthly_savings_usd": st.column_config.NumberColumn("estimated / month", format="dollar"),
    "realized_monthly_savings_usd": st.column_config.NumberColumn("realized / month", format="dollar"),
    "realized_to_estimated": st.column_config.NumberColumn("realized ÷ estimated", format="%.2f"),
    "median_realized_to_estimated": st.column_config.NumberColumn("median realized ÷ estimated", format="%.2f"),
    "idle_pct_before": st.column_config.NumberColumn("idle before", format="percent"),
    "idle_pct_after": st.column_config.NumberColumn("idle after", format="percent"),
    "regression": st.column_config.CheckboxColumn("regression"),
}


def savings_realized_panel(wh: queries.Warehouse, scope: Scope, as_of: date) -> None:
    st.subheader("Savings realized")
    month = queries.savings_realized(wh, scope, as_of).iloc[0]
    outcomes = queries.change_outcomes(wh, scope)
    measured = outcomes[outcomes["outcome_status"] == "measured"]
    k = st.columns(3)
    k[0].metric(f"Savings realized this month ({as_of:%b %Y})", money(month["realized_savings_usd"]),
                help=f"{int(month['changes'])} change(s), {int(month['days_in_effect'])} change-days in effect: each "
                     "measured change's realized daily saving × the days it was in effect this month.")
    k[1].metric("Realized / month (measured changes)", money(measured["realized_monthly_savings_usd"].sum()))
    k[2].metric("Regressions", f"{int(outcomes['regression'].sum())}" if not outcomes.empty else "0")
    calibration = queries.change_calibration(wh, scope)
    if calibration.empty:
        st.info("No applied change has an outcome yet (`gpufinops ingest changes`, then `gpufinops build`).")
        return
    st.caption("How far the recommender's estimates came true, per kind (median of realized ÷ estimated).")
    st.dataframe(calibration, hide_index=True, key="change_calibration", column_config=_FORMATS)


def outcomes_history(wh: queries.Warehouse, scope: Scope) -> None:
    st.subheader("Applied changes: what they saved")
    try:
        df = queries.change_outcomes(wh, scope)
    except Exception as exc:  # no warehouse built yet: the queue still works
        st.info(f"No outcomes yet: {exc}")
        return
    if df.empty:
        st.info("No applied change has an outcome yet (`gpufinops ingest changes`, then `gpufinops build`).")
        return
    cols = ["change_id", "kind", "cluster", "namespace", "target_name", "status", "outcome_status", "window_days",
            "cost_before_usd", "cost_after_usd", "est_monthly_savings_usd", "realized_monthly_savings_usd",
            "realized_to_estimated", "regression"]
    st.dataframe(df[cols], hide_index=True, key="outcomes_history", column_config=_FORMATS)


def change_outcome_panel(wh: queries.Warehouse, scope: Scope, change_id: str) -> None:
    try:
        df = queries.change_outcomes(wh, scope)
    except Exception:
        return
    row = df[df["change_id"] == change_id]
    if row.empty:
        return
    o = row.iloc[0]
    st.subheader("Outcome")
    if o["outcome_status"] != "measured":
        st.info(f"Not measured yet: {o['outcome_status'].replace('_', ' ')}.")
        return
    st.caption(f"{int(o['window_days'])} day(s) before ({o['before_start_day']} .. {o['before_end_day']}) against "
               f"{int(o['window_days'])} after ({o['after_start_day']} .. {o['after_end_day']}); the rollout days are left out.")
    k = st.columns(4)
    k[0].metric("Cost before → after", f"{money(o['cost_before_usd'])} → {money(o['cost_after_usd'])}")
    k[1].metric("Idle before → after", f"{pct(o['idle_pct_before'])} → {pct(o['idle_pct_after'])}")
    k[2].metric("Realized / month", money(o["realized_monthly_savings_usd"]),
                help=f"estimated {money(o['est_monthly_savings_usd'])}")
    ratio = o["realized_to_estimated"]
    k[3].metric("Realized ÷ estimated", "—" if pd.isna(ratio) else f"{ratio:.2f}")
    if o["regression"]:
        what = [w for w, flag in (("cost went up", o["cost_regressed"]), ("requests fell", o["requests_regressed"])) if flag]
        st.error("Regression: " + ", ".join(what) + ".")
