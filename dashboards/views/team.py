"""Team lead: only the viewer's teams — GPU-hours, cost, idle %, idle workloads, recommendations, and
proposing / approving the team's changes."""

from __future__ import annotations

from datetime import timedelta

import streamlit as st

from dashboards import charts, queries
from dashboards.budget_panel import budget_panel
from dashboards.session import current
from dashboards.unit_cost_panel import unit_cost_panel
from dashboards.widgets import change_actions, money, money_short, pct, table, window

ctx = current()
st.title("Team")
if not ctx.may_open("team"):
    st.error("The team view needs the team-lead, finance or platform-admin role.")
    st.stop()
scope, wh = ctx.scope, ctx.warehouse

visible = list(queries.teams(wh, scope)["team"])
requested = st.query_params.get("team")
if requested is not None and not scope.allows_team(requested):
    # a hand-edited ?team= is refused outright; the query layer would return nothing for it anyway
    st.error(f"Team `{requested}` is not one of yours.")
    st.stop()
if not visible:
    st.info("No cost rows for your teams yet." if scope.teams is not None else "No teams in the warehouse yet.")
    st.stop()
team = st.selectbox("Team", visible, index=visible.index(requested) if requested in visible else 0, key="team_pick")
st.query_params["team"] = team
team_scope = scope.narrow([team])

span = window(ctx, "team")
if span is None:
    st.info("No data for this team yet.")
    st.stop()
start, end = span

totals = queries.team_totals(wh, team_scope, start, end)
row = totals.iloc[0] if len(totals) else None
k = st.columns(5)
k[0].metric("GPU-hours", f"{row.gpu_hours:,.1f}" if row is not None else "0")
k[1].metric("Cost (chargeback)", money_short(row.chargeback_usd if row is not None else 0))
k[2].metric("Idle GPU %", pct(row.idle_pct if row is not None else None),
            help="Idle-allocated share of the measured GPU-hours (unmeasured hours are not guessed).")
k[3].metric("Idle GPU cost", money_short(row.idle_cost_usd if row is not None else 0))
unmeasured = (row.gpu_hours - row.measured_gpu_hours) if row is not None else 0
k[4].metric("Unmeasured GPU-hours", f"{unmeasured:,.1f}", help="Hours with no DCGM series for the pod.")

daily = queries.team_daily(wh, team_scope, start, end)
if not daily.empty:
    st.plotly_chart(charts.team_daily(daily), key="team_daily_chart")
    table(daily, f"team_{team}_daily")

unit_cost_panel(wh, team_scope, start, end)

st.subheader("Budget")
budget_panel(queries.budget_status(wh, team_scope, end - timedelta(days=1), ctx.dashboard.budgets_file,
                                   tuple(ctx.dashboard.budget_alert_thresholds)), ctx.dashboard.budgets_file,
             key=f"team_{team}_budget")

st.subheader("Most idle workloads")
idle = queries.idle_workloads(wh, team_scope, start, end, limit=10)
if idle.empty:
    st.info("No GPU workloads in this window.")
else:
    table(
        idle[["namespace", "workload_kind", "workload", "tier", "gpu_hours", "idle_pct", "idle_cost_usd",
              "cost_usd", "utilisation_pct"]],
        f"team_{team}_idle_workloads",
        column_config={
            "idle_pct": st.column_config.NumberColumn("idle %", format="percent"),
            "idle_cost_usd": st.column_config.NumberColumn("idle cost", format="dollar"),
            "cost_usd": st.column_config.NumberColumn("cost", format="dollar"),
            "utilisation_pct": st.column_config.LineChartColumn("GPU utilisation %", y_min=0, y_max=100),
        },
    )

st.subheader("Recommendations")
recs = queries.recommendations(wh, team_scope)
if recs is None:
    st.info("No recommendations yet: the recommender has not run (`gpufinops recommend`).")
elif recs.empty:
    st.success("No open recommendations for this team's workloads.")
else:
    st.metric("Estimated monthly savings", money(recs["est_monthly_savings_usd"].sum()))
    cols = [c for c in ["id", "kind", "namespace", "workload", "tier", "est_monthly_savings_usd", "confidence",
                        "risk", "status", "created_at"] if c in recs.columns]
    table(recs[cols], f"team_{team}_recommendations",
          column_config={"est_monthly_savings_usd": st.column_config.NumberColumn("savings / month", format="dollar")})

change_actions(ctx, team, recs)
