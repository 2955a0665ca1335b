"""The Platform page's what-if panel: run a priced placement simulation for one cluster and show
the stored result (``simulator.whatif_service``, the same code the API's ``/whatif`` serves)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

__all__ = ["render"]


def _curve(result: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for side in ("baseline", "scenario"):
        r = result[side]
        rows += [{"arrived %": x, "allocated %": y, "run": f"{side}: {r['policy']}"} for x, y in r["alloc_curve"]]
    return pd.DataFrame(rows)


def render(ctx: Any, clusters: list[str]) -> None:
    from simulator.engine import POLICIES
    from simulator.whatif_service import WhatIfRequest, latest_whatif, run_whatif

    st.subheader("What-if: scheduler policy, MIG, time-slicing, node mix")
    if not clusters:
        st.info("No cluster to simulate.")
        return
    home, warehouse = ctx.settings.home, ctx.settings.warehouse_path
    c = st.columns(4)
    cluster = c[0].selectbox("Cluster", clusters, key="whatif_cluster")
    policy = c[1].selectbox("Scenario policy", list(POLICIES), index=list(POLICIES).index("fgd"), key="whatif_policy")
    baseline = c[2].selectbox("Baseline policy", list(POLICIES), index=list(POLICIES).index("bestfit"),
                              key="whatif_baseline")
    seeds = c[3].number_input("Seeds", min_value=1, max_value=10, value=3, key="whatif_seeds")
    c2 = st.columns(3)
    add = c2[0].text_input("Add nodes (N:MODEL)", key="whatif_add")
    mig = c2[1].text_input("MIG layout (MODEL:SLICES)", key="whatif_mig")
    ts = c2[2].text_input("Time-slicing (MODEL:REPLICAS)", key="whatif_ts")
    if st.button("Run what-if", key="whatif_run"):  # the Platform page is for platform roles only
        req = WhatIfRequest(policy=policy, baseline_policy=baseline, seeds=int(seeds),
                            add_nodes=[add] if add else [], mig=[mig] if mig else [], timeslice=[ts] if ts else [])
        try:
            with st.spinner("simulating..."):
                run_whatif(home, warehouse, cluster, req)
        except Exception as exc:  # shown to the operator, who fixes the input
            st.error(str(exc))
    result = latest_whatif(home, cluster)
    if result is None:
        st.caption("No what-if stored for this cluster yet.")
        return
    k = st.columns(4)
    k[0].metric(f"Allocated at the end of arrival ({result['scenario']['policy']})",
                f"{result['scenario']['final_alloc_pct']:.1f} %",
                delta=f"{result['scenario']['final_alloc_pct'] - result['baseline']['final_alloc_pct']:+.1f} pp "
                      f"vs {result['baseline']['policy']}")
    k[1].metric("Fragmented GPUs, % of capacity", f"{result['scenario']['frag_pct_capacity']:.1f} %")
    k[2].metric("GPUs freed", f"{result['gpus_freed']:,.1f}")
    k[3].metric("Savings per month", f"${result['monthly_savings_usd']:,.0f}",
                help=f"GPUs freed × ${result['usd_per_gpu_hour']:.2f}/GPU-hour (fct_node_hourly) × 730 h")
    st.line_chart(_curve(result), x="arrived %", y="allocated %", color="run")
    st.caption(f"{result['pods']} pod shapes from the last {result['request']['window']}, "
               f"{result['request']['seeds']} seeds, computed {result['computed_at']}.")
