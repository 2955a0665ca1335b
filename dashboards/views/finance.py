"""Finance: chargeback per tenant and team, the cost lines, idle cost, forecast, budgets, the bill."""

from __future__ import annotations

from datetime import timedelta

import streamlit as st

from dashboards import charts, queries
from dashboards.budget_panel import budget_panel
from dashboards.session import current
from dashboards.widgets import money, money_short, pct, table, window
from gpufinops.views.budgets import fleet_forecast

ctx = current()
st.title("Finance")
if not ctx.may_open("finance"):
    st.error("The finance view needs the finance or platform-admin role.")
    st.stop()
scope, wh = ctx.scope, ctx.warehouse

span = window(ctx, "finance")
if span is None:
    st.info("The warehouse has no showback rows yet. Run `gpufinops build` after ingesting data.")
    st.stop()
start, end = span
shared = tuple(ctx.settings.cost.shared_namespaces)
as_of = end - timedelta(days=1)
month_start = as_of.replace(day=1)
# one pass over the hourly marts for the window and the month to date (the forecast's input)
lines_all = queries.cost_lines_daily(wh, scope, min(start, month_start), end, shared)
lines = lines_all[lines_all["day"] >= start].reset_index(drop=True)
spend_all = queries.spend_by_team_daily(wh, scope, min(start, month_start), end, shared)
spend = spend_all[spend_all["day"] >= start]
forecast = fleet_forecast(queries.budget_run_rates(wh, scope, as_of))
total = lines["total_usd"].sum()

st.caption(f"{start} to {as_of} (UTC). Charged back to teams + unrecovered = total cost.")
k = st.columns(5)
charged, unallocated, idle = (lines[c].sum() for c in ("charged_to_teams_usd", "unallocated_usd", "idle_usd"))
# short amounts ($905.2k) so five tiles fit side by side; the exact figure is in each tile's help
k[0].metric("Total cost", money_short(total), help=f"Exactly {money(total)}.")
k[1].metric("Charged back to teams", money_short(charged), help=f"Exactly {money(charged)}.")
k[2].metric("Unallocated (idle capacity)", money_short(unallocated), help=f"Exactly {money(unallocated)}.")
k[3].metric("Idle-allocated GPU cost", money_short(idle),
            help=f"Exactly {money(idle)}: GPU cost of allocated GPUs that sat idle, GPU part × (1 − utilisation).")
k[4].metric(f"Forecast, end of {as_of:%b}",
            money(forecast.forecast, cents=False) if forecast.forecast < 100_000 else money_short(forecast.forecast),
            help=f"Month to date {money(forecast.month_to_date)} + {forecast.days_left} days × "
                 f"run rate {money(forecast.run_rate_per_day)}/day (mean of the last {forecast.run_rate_days} days).")

st.plotly_chart(charts.cost_lines(lines), key="cost_lines_chart")
table(lines, "cost_lines_daily")

st.subheader("Spend by tenant and team")
by = st.radio("Group by", ["team", "tenant"], horizontal=True, key="finance_by")
if spend.empty:
    st.info("No chargeback rows in this window.")
else:
    st.plotly_chart(charts.spend_over_time(spend, by=by), key="spend_chart")
    summary = (
        spend.groupby(["tenant", "team"], as_index=False)[
            ["gpu_hours", "idle_gpu_hours", "direct_cost_usd", "idle_cost_usd", "shared_cost_usd",
             "unallocated_share_usd", "chargeback_usd"]
        ].sum().sort_values("chargeback_usd", ascending=False)
    )
    summary["idle_gpu_pct"] = summary["idle_gpu_hours"] / summary["gpu_hours"].where(summary["gpu_hours"] > 0)
    table(summary, "chargeback_by_team", column_config={"idle_gpu_pct": st.column_config.NumberColumn(format="percent")})

st.subheader("Budget vs actual")
status = queries.budget_status(wh, scope, as_of, ctx.dashboard.budgets_file, tuple(ctx.dashboard.budget_alert_thresholds))
budget_panel(status, ctx.dashboard.budgets_file)

st.subheader("Bill reconciliation")
bill = queries.bill_reconciliation(wh, scope, start, end)
if bill.empty:
    st.info("No FOCUS bill loaded for these days (`gpufinops ingest billing --focus FILE`).")
else:
    by_status = bill.groupby("status", as_index=False).agg(
        resources=("resource_id", "count"), computed_cost_usd=("computed_cost_usd", "sum"),
        billed_cost_usd=("billed_cost_usd", "sum"), effective_cost_usd=("effective_cost_usd", "sum"),
        difference_usd=("difference_usd", "sum"),
    )
    b = st.columns(3)
    b[0].metric("Computed", money(bill["computed_cost_usd"].sum()))
    b[1].metric("Billed (effective)", money(bill["effective_cost_usd"].sum()))
    matched = (bill["status"] == "matched").mean()
    b[2].metric("Lines matched", pct(matched))
    table(by_status, "bill_reconciliation_status")
    table(bill, "bill_reconciliation_daily")

from dashboards.outcomes_panel import savings_realized_panel  # noqa: E402

savings_realized_panel(wh, scope, as_of)

from dashboards.focus_download import focus_download  # noqa: E402 - the section renders last

focus_download(wh, start, as_of)
