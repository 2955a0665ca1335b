"""Layout helpers the pages share: money formatting, the date window, tables with a CSV download, and
the team page's change-control controls."""

from __future__ import annotations

from datetime import date, timedelta

import pandas as pd
import streamlit as st

from dashboards import queries
from dashboards.session import ViewContext

__all__ = ["money", "pct", "window", "table", "change_actions"]

DEFAULT_WINDOW_DAYS = 30


def money(value: float | None, cents: bool = True) -> str:
    if value is None or pd.isna(value):
        return "—"
    return f"${value:,.2f}" if cents else f"${value:,.0f}"


def money_short(value: float | None) -> str:
    """A headline amount that fits a metric tile: cents below $100k, then $905.2k, $1.23M."""
    if value is None or pd.isna(value):
        return "—"
    if abs(value) < 100_000:
        return money(value)
    if abs(value) < 1_000_000:
        return f"${value / 1e3:,.1f}k"
    return f"${value / 1e6:,.2f}M"


def pct(value: float | None) -> str:
    if value is None or pd.isna(value):
        return "—"
    return f"{value:.1%}"


def window(ctx: ViewContext, key: str) -> tuple[date, date] | None:
    """The [start, end) days to show: the last 30 days of data unless the viewer picks others."""
    bounds = queries.data_window(ctx.warehouse, ctx.scope)
    first, last = bounds.iloc[0]["first_day"], bounds.iloc[0]["last_day"]
    if pd.isna(first) or pd.isna(last):
        return None
    first, last = pd.Timestamp(first).date(), pd.Timestamp(last).date()
    default_start = max(first, last - timedelta(days=DEFAULT_WINDOW_DAYS - 1))
    picked = st.sidebar.date_input(
        "Days", value=(default_start, last), min_value=first, max_value=last, key=f"{key}_window"
    )
    if isinstance(picked, tuple) and len(picked) == 2:
        start, end = picked
    else:  # half-picked range: keep the default until the second date is chosen
        start, end = default_start, last
    st.sidebar.caption(f"Data from {first} to {last} (UTC days).")
    return start, end + timedelta(days=1)


def default_column_config(df: pd.DataFrame) -> dict:
    """Units for the columns the marts name by unit: ``*_usd`` as dollars, ``*_hours`` with one decimal,
    unit costs (``cost_per_*``) with four; the CSV download keeps the full values."""
    config: dict = {}
    for col in df.columns:
        name = str(col)
        if not pd.api.types.is_numeric_dtype(df[col]):
            continue
        if name.startswith("cost_per_"):
            config[col] = st.column_config.NumberColumn(format="$%.4f")
        elif name.endswith("_usd") or name.endswith("_usd_day"):
            config[col] = st.column_config.NumberColumn(format="dollar")
        elif name.endswith("_hours") or name == "gpu_hours":
            config[col] = st.column_config.NumberColumn(format="%.1f")
    return config


def table(df: pd.DataFrame, name: str, *, column_config: dict | None = None, hide_index: bool = True) -> None:
    """Show a table, in the units of its columns, and offer exactly what is shown as a CSV download."""
    config = default_column_config(df) | (column_config or {})
    st.dataframe(df, column_config=config or None, hide_index=hide_index, width="stretch")
    st.download_button(
        f"Download {name}.csv",
        df.to_csv(index=False).encode(),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv_{name}",
        on_click="ignore",
        icon=":material/download:",
    )


def change_actions(ctx: ViewContext, team: str, recs: pd.DataFrame | None) -> None:
    """Change control on the team page: propose a change from one of the team's recommendations, and
    approve / reject the team's changes waiting for a decision (ChangeService decides who may; its
    refusals, e.g. four-eyes, show as errors). The Approvals page has each change's evidence and history."""
    from dashboards import change_control as cc
    from gpufinops.errors import GpufinopsError

    st.subheader("Changes")
    actor = cc.actor_of(ctx.identity)
    try:
        svc = cc.service(ctx)
    except GpufinopsError as exc:
        st.warning(f"Change control is unavailable: {exc}")
        return
    cc.show_flash()

    def propose() -> None:
        rec_id = st.session_state.get("rec_pick")
        ticket = (st.session_state.get("rec_ticket") or "").strip() or None
        reason = (st.session_state.get("rec_reason") or "").strip() or None
        cc.run_action(f"Propose from {rec_id}", lambda: svc.create_from_recommendation(
            str(rec_id), actor=actor, ticket=ticket, reason=reason))

    def decide(decision: str) -> None:
        change_id = str(st.session_state.get("chg_pick"))
        reason = st.session_state.get("chg_reason") or ""
        if decision == "approve":
            cc.run_action("Approve", lambda: svc.approve(change_id, actor=actor, reason=reason))
        else:
            cc.run_action("Reject", lambda: svc.reject(change_id, actor=actor, reason=reason))

    if recs is not None and not recs.empty:
        labels = {r.id: f"{r.id} — {r.kind} {r.workload}" for r in recs.itertuples()}
        cols = st.columns([4, 2, 4, 2], vertical_alignment="bottom")
        cols[0].selectbox("Recommendation", list(labels), key="rec_pick", format_func=lambda i: labels.get(i, i))
        cols[1].text_input("Ticket", key="rec_ticket", placeholder="COST-123")
        cols[2].text_input("Reason", key="rec_reason", placeholder="why make this change")
        cols[3].button("Propose change", key="rec_propose", on_click=propose)

    waiting = cc.queue(svc, actor, team=team)
    if not waiting:
        st.caption("No changes of this team wait for a decision.")
        return
    table(cc.changes_frame(waiting), f"team_{team}_changes")
    cols = st.columns([4, 4, 1, 1], vertical_alignment="bottom")
    cols[0].selectbox("Change", [c.id for c in waiting], key="chg_pick")
    cols[1].text_input("Reason for your decision", key="chg_reason")
    cols[2].button("Approve", key="chg_approve", type="primary", on_click=decide, args=("approve",))
    cols[3].button("Reject", key="chg_reject", on_click=decide, args=("reject",))
    st.caption("Each change's evidence, diff, plan and history are on the Approvals page.")
