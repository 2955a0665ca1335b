"""Layout helpers the pages share: money formatting, the date window, tables with a CSV download."""

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


def table(df: pd.DataFrame, name: str, *, column_config: dict | None = None, hide_index: bool = True) -> None:
    """Show a table and offer exactly what is shown as a CSV download."""
    st.dataframe(df, column_config=column_config, hide_index=hide_index, width="stretch")
    st.download_button(
        f"Download {name}.csv",
        df.to_csv(index=False).encode(),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv_{name}",
        on_click="ignore",
        icon=":material/download:",
    )


def change_actions(ctx: ViewContext, recs: pd.DataFrame) -> None:
    """Approve / reject for the viewer's recommendations.

    Change control (issue 4/5) plugs in here: it turns a recommendation into a change and records the
    approval with its reason. Until it exists the buttons stay disabled and say why.
    """
    st.caption("Approving or rejecting a change arrives with change control; nothing is applied from here yet.")
    cols = st.columns([3, 1, 1])
    cols[0].selectbox("Recommendation", list(recs["id"]), key="rec_pick", disabled=True)
    cols[1].button("Approve", disabled=True, key="rec_approve")
    cols[2].button("Reject", disabled=True, key="rec_reject")
