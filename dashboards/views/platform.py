"""Platform: capacity, fragmentation, allocation heatmap, stranded GPUs, consolidation, pending pods."""

from __future__ import annotations

import streamlit as st

from dashboards import charts, queries
from dashboards.plans import read_plan
from dashboards.session import current
from dashboards.widgets import pct, table, window

ctx = current()
st.title("Platform")
if not ctx.may_open("platform"):
    st.error("The platform view needs the platform-admin role.")
    st.stop()
scope, wh = ctx.scope, ctx.warehouse

span = window(ctx, "platform")
if span is None:
    st.info("The warehouse has no rows yet. Run `gpufinops build` after ingesting data.")
    st.stop()
start, end = span
cap = queries.capacity_hourly(wh, scope, start, end)
clusters = sorted(cap["cluster"].unique()) if not cap.empty else []
picked = st.multiselect("Clusters", clusters, default=clusters, key="platform_clusters")
cap = cap[cap["cluster"].isin(picked)]

if cap.empty:
    st.info("No capacity rows in this window.")
else:
    latest = cap[cap["hour"] == cap["hour"].max()]
    k = st.columns(5)
    k[0].metric("GPU capacity", f"{latest['gpu_capacity'].sum():,.0f}")
    k[1].metric("Allocated", pct(latest["gpu_allocated"].sum() / max(latest["gpu_capacity"].sum(), 1e-9)))
    k[2].metric("Utilised", pct(latest["gpu_utilized"].sum() / max(latest["gpu_capacity"].sum(), 1e-9)))
    k[3].metric("Fragmented GPUs", f"{latest['fragmentation_gpus'].sum():,.1f}")
    in_use = latest["nodes_in_use"].sum()
    k[4].metric("Bin-packing efficiency", pct(latest["nodes_lower_bound"].sum() / in_use if in_use else None),
                help="Lower bound on GPU nodes needed ÷ GPU nodes in use (DESIGN §3).")
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.capacity(cap), key="capacity_chart")
    c2.plotly_chart(charts.fragmentation(cap), key="fragmentation_chart")
    st.plotly_chart(charts.binpacking(cap), key="binpacking_chart")
    table(cap, "cluster_capacity_hourly")

st.subheader("Allocation per node and GPU")
nodes = queries.node_allocation(wh, scope)
nodes = nodes[nodes["cluster"].isin(picked)] if not nodes.empty else nodes
if nodes.empty:
    st.info("No GPU nodes.")
else:
    pools = ["(all)"] + sorted(nodes["node_pool"].dropna().unique())
    pool = st.selectbox("Node pool", pools, key="platform_pool")
    shown = nodes if pool == "(all)" else nodes[nodes["node_pool"] == pool]
    st.plotly_chart(charts.node_gpu_heatmap(shown), key="heatmap_chart")
    table(shown, "node_allocation_latest")

st.subheader("Stranded GPUs")
stranded = queries.stranded_gpus(wh, scope)
stranded = stranded[stranded["cluster"].isin(picked)] if not stranded.empty else stranded
st.caption("Free GPUs the typical workload cannot use (fragmentation, DESIGN §3), at the latest hour. "
           "Partly allocated nodes below hold the stranded capacity.")
table(stranded, "stranded_gpus")
if not nodes.empty:
    partial = nodes[(nodes["gpu_allocated"] > 0) & (nodes["gpu_free"] > 0)].sort_values("gpu_free", ascending=False)
    table(partial, "partly_allocated_nodes")

st.subheader("Consolidation plan")
plan = queries.recommendations(wh, scope, kinds=("consolidate_nodes",))
if plan is None:
    st.info("No consolidation plan yet: the recommender has not run (`gpufinops recommend`).")
elif plan.empty:
    st.success("The recommender found nothing to consolidate.")
else:
    plans = [read_plan(rec) for _, rec in plan.iterrows()]
    st.metric("Consolidation savings per month", f"${sum(p.monthly_savings_usd for p in plans):,.0f}")
    for p in plans:
        with st.expander(f"{p.cluster} / {p.pool}: {p.nodes_before} → {p.nodes_after} nodes "
                         f"(lower bound {p.lower_bound}), save ${p.monthly_savings_usd:,.0f}/month", expanded=True):
            st.write("Nodes freed: " + (", ".join(f"`{n}`" for n in p.freed_nodes) or "none"))
            if p.moves.empty:
                st.caption("No pod has to move: the freed nodes' pods fit where they are or are daemon pods.")
            else:
                st.dataframe(p.moves, hide_index=True, width="stretch")
    table(plan, "consolidation_plan")

st.subheader("Pending GPU pods")
pending = queries.pending_gpu_pods(wh, scope, start, end)
pending = pending[pending["cluster"].isin(picked)] if not pending.empty else pending
if pending.empty:
    st.info("The warehouse records no pending GPU pods.")
else:
    latest_pending = pending[pending["hour"] == pending["hour"].max()]
    st.metric("GPU pods pending (latest hour)", f"{latest_pending['pending_gpu_pods'].sum():,.0f}")
    st.plotly_chart(charts.pending_pods(pending), key="pending_chart")
    table(pending, "pending_gpu_pods_hourly")

from dashboards import whatif_panel  # noqa: E402

whatif_panel.render(ctx, picked)
