"""Reading a consolidation recommendation (DESIGN §5) into what the platform page shows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

__all__ = ["ConsolidationPlan", "read_plan"]


@dataclass(frozen=True)
class ConsolidationPlan:
    cluster: str
    pool: str
    nodes_before: int | None
    nodes_after: int | None
    lower_bound: int | None
    gap: float | None
    freed_nodes: list[str]
    moves: pd.DataFrame  # one row per pod move (pod -> node), columns as the recommender writes them
    monthly_savings_usd: float


def _json(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    try:
        loaded = json.loads(value) if isinstance(value, str) else {}
    except json.JSONDecodeError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def read_plan(rec: pd.Series) -> ConsolidationPlan:
    current, proposed, evidence = _json(rec.get("current")), _json(rec.get("proposed")), _json(rec.get("evidence"))
    workload = str(rec.get("workload") or "")
    return ConsolidationPlan(
        cluster=str(rec.get("cluster")),
        pool=str(current.get("node_pool") or workload.removeprefix("nodepool/") or "?"),
        nodes_before=current.get("nodes"),
        nodes_after=proposed.get("nodes"),
        lower_bound=evidence.get("lower_bound"),
        gap=evidence.get("gap"),
        freed_nodes=list(proposed.get("freed_nodes") or []),
        moves=pd.DataFrame(proposed.get("moves") or [], dtype=object),
        monthly_savings_usd=float(rec.get("est_monthly_savings_usd") or 0.0),
    )
