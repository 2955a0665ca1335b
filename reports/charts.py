"""Static PNG charts for reports (e-mail clients run no JavaScript, so no plotly here)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # headless: CronJobs have no display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from gpufinops.views.names import COST_LINES  # noqa: E402

__all__ = ["cost_lines_png", "spend_by_team_png", "team_daily_png"]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _stacked(pivot: pd.DataFrame, title: str) -> bytes:
    fig, ax = plt.subplots(figsize=(8, 3.2))
    bottom = None
    labels = [pd.Timestamp(d).strftime("%d %b") for d in pivot.index]
    for col in pivot.columns:
        ax.bar(labels, pivot[col], bottom=bottom, label=str(col))
        bottom = pivot[col] if bottom is None else bottom + pivot[col]
    ax.set_title(title)
    ax.set_ylabel("USD")
    ax.legend(fontsize=7, ncol=5, loc="upper left", bbox_to_anchor=(0, -0.14 if len(labels) <= 10 else -0.25),
              frameon=False)
    ax.tick_params(axis="x", labelsize=7, rotation=45 if len(labels) > 10 else 0)
    return _png(fig)


def cost_lines_png(lines: pd.DataFrame) -> bytes:
    pivot = lines.set_index("day")[list(COST_LINES)].rename(columns=COST_LINES)
    return _stacked(pivot, "Daily cost by line (adds up to the total)")


def spend_by_team_png(spend: pd.DataFrame, top: int = 8) -> bytes:
    pivot = spend.pivot_table(index="day", columns="team", values="chargeback_usd", aggfunc="sum").fillna(0)
    order = pivot.sum().sort_values(ascending=False).index
    keep = list(order[:top])
    rest = [c for c in order if c not in keep]
    shown = pivot[keep].copy()
    if rest:
        shown["other teams"] = pivot[rest].sum(axis=1)
    return _stacked(shown, "Chargeback per day by team")


def team_daily_png(daily: pd.DataFrame) -> bytes:
    pivot = daily.pivot_table(index="day", columns="namespace", values="chargeback_usd", aggfunc="sum").fillna(0)
    return _stacked(pivot, "Cost per day by namespace")
