"""Plotly figures for the pages. Each takes a query's DataFrame and returns a figure; no SQL here."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

# the lines that add up to the total cost, in stacking order, with their labels (re-exported)
from gpufinops.views.names import COST_LINES

__all__ = [
    "COST_LINES",
    "spend_over_time",
    "cost_lines",
    "budget_vs_actual",
    "team_daily",
    "capacity",
    "fragmentation",
    "binpacking",
    "node_gpu_heatmap",
    "pending_pods",
]

_HEIGHT = 360


def _daily(fig: go.Figure) -> go.Figure:
    # one bar per UTC day, labelled by the day (a date axis would centre bars on midnight)
    fig.update_xaxes(type="category")
    return fig


def _layout(fig: go.Figure, title: str, yaxis: str) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, y=0.98), height=_HEIGHT, margin=dict(l=10, r=10, t=40, b=70), yaxis_title=yaxis,
        legend=dict(orientation="h", yanchor="top", y=-0.16, xanchor="left", x=0),
    )
    return fig


def spend_over_time(df: pd.DataFrame, by: str = "team") -> go.Figure:
    """Stacked daily chargeback by team (or tenant)."""
    fig = go.Figure()
    pivot = df.pivot_table(index="day", columns=by, values="chargeback_usd", aggfunc="sum").fillna(0)
    for name in pivot.sum().sort_values(ascending=False).index:
        fig.add_bar(x=pivot.index, y=pivot[name], name=str(name))
    fig.update_layout(barmode="stack")
    return _layout(_daily(fig), f"Chargeback per day by {by}", "USD")


def cost_lines(df: pd.DataFrame) -> go.Figure:
    """GPU, CPU/memory, shared and unallocated stacked per day, with the total on top."""
    fig = go.Figure()
    for col, label in COST_LINES.items():
        fig.add_bar(x=df["day"], y=df[col], name=label)
    fig.add_scatter(x=df["day"], y=df["total_usd"], name="Total", mode="lines+markers", line=dict(color="black"))
    fig.update_layout(barmode="stack")
    return _layout(_daily(fig), "Where the money goes (lines add up to the total)", "USD")


def budget_vs_actual(df: pd.DataFrame) -> go.Figure:
    shown = df[df["monthly_budget_usd"].notna()]
    fig = go.Figure()
    fig.add_bar(x=shown["team"], y=shown["month_to_date_usd"], name="Month to date")
    fig.add_bar(x=shown["team"], y=shown["forecast_usd"], name="Month-end forecast", opacity=0.6)
    fig.add_scatter(x=shown["team"], y=shown["monthly_budget_usd"], name="Budget", mode="markers",
                    marker=dict(symbol="line-ew-open", size=40, line=dict(width=3, color="crimson")))
    fig.update_layout(barmode="group")
    return _layout(fig, "Budget vs actual (this month)", "USD")


def team_daily(df: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    pivot = df.pivot_table(index="day", columns="namespace", values="chargeback_usd", aggfunc="sum").fillna(0)
    for ns in pivot.columns:
        fig.add_bar(x=pivot.index, y=pivot[ns], name=str(ns))
    fig.update_layout(barmode="stack")
    return _layout(_daily(fig), "Cost per day by namespace", "USD")


def capacity(df: pd.DataFrame) -> go.Figure:
    """GPU capacity vs allocated vs utilised over time (summed over the clusters shown)."""
    agg = df.groupby("hour")[["gpu_capacity", "gpu_allocated", "gpu_utilized"]].sum().reset_index()
    fig = go.Figure()
    fig.add_scatter(x=agg["hour"], y=agg["gpu_capacity"], name="Capacity", mode="lines", line=dict(width=3))
    fig.add_scatter(x=agg["hour"], y=agg["gpu_allocated"], name="Allocated", mode="lines", fill="tozeroy")
    fig.add_scatter(x=agg["hour"], y=agg["gpu_utilized"], name="Utilised", mode="lines", fill="tozeroy")
    return _layout(fig, "GPUs: capacity, allocated, utilised", "GPUs")


def fragmentation(df: pd.DataFrame) -> go.Figure:
    agg = df.groupby("hour")[["fragmentation_gpus", "gpu_unallocated"]].sum().reset_index()
    rate = agg["fragmentation_gpus"] / agg["gpu_unallocated"].where(agg["gpu_unallocated"] > 0)
    fig = go.Figure()
    fig.add_scatter(x=agg["hour"], y=agg["fragmentation_gpus"], name="Fragmented GPUs", mode="lines")
    fig.add_scatter(x=agg["hour"], y=rate, name="Rate (of free GPUs)", mode="lines", yaxis="y2",
                    line=dict(dash="dot"))
    fig.update_layout(yaxis2=dict(overlaying="y", side="right", tickformat=".0%", rangemode="tozero"))
    return _layout(fig, "Fragmented GPUs", "GPUs")


def binpacking(df: pd.DataFrame) -> go.Figure:
    agg = df.groupby("hour")[["nodes_in_use", "nodes_lower_bound"]].sum().reset_index()
    fig = go.Figure()
    fig.add_scatter(x=agg["hour"], y=agg["nodes_in_use"], name="GPU nodes in use", mode="lines")
    fig.add_scatter(x=agg["hour"], y=agg["nodes_lower_bound"], name="Lower bound", mode="lines",
                    line=dict(dash="dash"))
    return _layout(fig, "Bin-packing: nodes in use vs the lower bound", "nodes")


def node_gpu_heatmap(df: pd.DataFrame, max_nodes: int = 60) -> go.Figure:
    """Node × GPU slot: how much of each GPU slot is allocated (slots filled in order, 1 = fully)."""
    shown = df.sort_values(["gpu_allocated", "node"], ascending=[False, True]).head(max_nodes)
    width = int(shown["gpu_capacity"].max()) if len(shown) else 0
    z, text = [], []
    for alloc, cap in zip(shown["gpu_allocated"], shown["gpu_capacity"], strict=True):
        row = []
        for slot in range(width):
            row.append(None if slot >= cap else min(1.0, max(0.0, alloc - slot)))
        z.append(row)
        text.append([f"{alloc:g} of {cap:g} GPUs allocated"] * width)
    fig = go.Figure(
        go.Heatmap(
            z=z, x=[f"GPU {i}" for i in range(width)], y=list(shown["node"]), zmin=0, zmax=1,
            colorscale="Blues", text=text, hovertemplate="%{y} %{x}: %{z:.2f}<br>%{text}<extra></extra>",
            colorbar=dict(title="allocated"),
        )
    )
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "Allocation per node and GPU (latest hour)", "node").update_layout(
        height=max(_HEIGHT, 18 * math.ceil(len(shown)) + 80)
    )


def pending_pods(df: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for cluster, part in df.groupby("cluster"):
        fig.add_scatter(x=part["hour"], y=part["pending_gpu_pods"], name=str(cluster), mode="lines")
    return _layout(fig, "GPU pods waiting for a node", "pods")
