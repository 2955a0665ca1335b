"""The Team page's serving unit-cost panel: cost per 1k requests and per 1M tokens of the team's
serving workloads (fct_serving_unit_cost_daily via exports.unit_cost), and the requests of series
in the team's namespaces that matched no pod."""

from __future__ import annotations

from datetime import date

import pandas as pd
import streamlit as st

from dashboards import queries
from dashboards.identity import Scope

__all__ = ["unit_cost_panel"]


def unit_cost_panel(wh: queries.Warehouse, scope: Scope, start: date, end: date) -> None:
    from exports.unit_cost import unit_costs, unmatched_requests

    teams = sorted(scope.teams) if scope.teams is not None else None
    with queries.cursor(wh) as cur:
        rows = unit_costs(cur, start, end, teams=teams)
        namespaces = sorted({r["namespace"] for r in rows})
        unmatched = unmatched_requests(cur, start, end, namespaces) if namespaces else []
    st.subheader("Serving unit cost")
    if not rows:
        st.info("No request counters for this team's serving workloads (`gpufinops ingest serving`).")
        return
    df = pd.DataFrame(rows)[["namespace", "workload", "model", "requests", "tokens", "cost_usd", "idle_cost_usd",
                             "shared_cost_usd", "cost_per_1k_requests", "cost_per_1m_tokens"]]
    top = df.iloc[0]
    k = st.columns(3)
    k[0].metric("Requests", f"{df['requests'].sum():,.0f}")
    k[1].metric(f"Cost per 1k requests ({top.workload})", f"${top.cost_per_1k_requests:,.4f}"
                if pd.notna(top.cost_per_1k_requests) else "—")
    k[2].metric(f"Cost per 1M tokens ({top.workload})", f"${top.cost_per_1m_tokens:,.4f}"
                if pd.notna(top.cost_per_1m_tokens) else "—")
    st.dataframe(df, hide_index=True, key="unit_cost_table", column_config={
        "requests": st.column_config.NumberColumn(format="localized"),
        "tokens": st.column_config.NumberColumn(format="localized"),
        "cost_usd": st.column_config.NumberColumn("cost", format="dollar"),
        "idle_cost_usd": st.column_config.NumberColumn("idle cost", format="dollar"),
        "shared_cost_usd": st.column_config.NumberColumn("shared + overhead", format="dollar"),
        "cost_per_1k_requests": st.column_config.NumberColumn("$ / 1k requests", format="$%.4f"),
        "cost_per_1m_tokens": st.column_config.NumberColumn("$ / 1M tokens", format="$%.4f"),
    })
    if unmatched:
        n = sum(r["requests"] or 0 for r in unmatched)
        st.caption(f"{n:,.0f} requests in these namespaces came from series that match no pod "
                   "(no pod label, or a pod the warehouse never saw): counted, not costed.")
