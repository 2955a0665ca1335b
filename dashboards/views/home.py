"""Home: the last week at a glance for whoever is looking, and links to their pages."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import streamlit as st

from dashboards import queries
from dashboards.session import current
from dashboards.widgets import money, money_short, pct

ctx = current()
scope, wh = ctx.scope, ctx.warehouse
st.title("GPU cost at a glance")

bounds = queries.data_window(wh, scope).iloc[0]
if pd.isna(bounds["last_day"]):
    st.info("No cost rows yet. Run `gpufinops build` after ingesting data.")
    st.stop()
last = pd.Timestamp(bounds["last_day"]).date()
start, end = max(pd.Timestamp(bounds["first_day"]).date(), last - timedelta(days=6)), last + timedelta(days=1)
who = "the whole fleet" if scope.teams is None else "team " + ", ".join(scope.teams)
st.caption(f"{who}, {start} to {last} (UTC)")

totals = queries.team_totals(wh, scope, start, end)
measured = totals["measured_gpu_hours"].sum()
if scope.fleet:  # the whole bill, unallocated capacity included
    cost = queries.cost_lines_daily(wh, scope, start, end, tuple(ctx.settings.cost.shared_namespaces))["total_usd"].sum()
else:
    cost = totals["chargeback_usd"].sum()
k = st.columns(4)
k[0].metric("Cost, last 7 days", money_short(cost), help=f"Exactly {money(cost)}.")
k[1].metric("GPU-hours", f"{totals['gpu_hours'].sum():,.0f}")
k[2].metric("Idle GPU %", pct(1 - totals["utilized_gpu_hours"].sum() / measured if measured else None),
            help="Allocated but idle share of the measured GPU-hours.")
k[3].metric("Idle GPU cost", money_short(totals["idle_cost_usd"].sum()))

if scope.fleet:
    now = queries.stranded_gpus(wh, scope)
    f = st.columns(4)
    f[0].metric("GPUs now", f"{now['gpu_capacity'].sum():,.0f}")
    f[1].metric("Unallocated GPUs now", f"{now['gpu_free'].sum():,.1f}")
    f[2].metric("Stranded by fragmentation", f"{now['stranded_gpus'].sum():,.1f}")
    f[3].metric("Charged back to teams, 7 days", money_short(totals["chargeback_usd"].sum()))

st.subheader("Top recommendations")
recs = queries.recommendations(wh, scope)
if recs is None:
    st.info("No recommendations yet: the recommender has not run (`gpufinops recommend`).")
elif recs.empty:
    st.success("No open recommendations.")
else:
    st.metric("Estimated savings per month", money(recs["est_monthly_savings_usd"].sum()))
    cols = [c for c in ["kind", "cluster", "namespace", "workload", "est_monthly_savings_usd", "risk"] if c in recs]
    st.dataframe(recs[cols].head(5), hide_index=True, width="stretch",
                 column_config={"est_monthly_savings_usd": st.column_config.NumberColumn("savings / month", format="dollar")})

st.subheader("Your views")
for key, title in (("finance", "Finance"), ("team", "Team"), ("platform", "Platform"), ("approvals", "Approvals")):
    if ctx.may_open(key):
        st.page_link(f"views/{key}.py", label=title)
