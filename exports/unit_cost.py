"""Serving unit costs over a window of days, read from ``fct_serving_unit_cost_daily``.

The mart holds each day's cost, requests and tokens per (workload, model) and the day's rates; over
a window of several days the rate is the window's cost over its requests (or tokens): Σ cost / Σ
requests × 1e3 and Σ cost / Σ tokens × 1e6, null when the count is 0 or unknown. This module is the
one place that ratio of sums is taken, for the API, the Team page and the reports alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

import duckdb

__all__ = ["MART", "unit_costs", "unmatched_requests", "workload_unit_cost"]

MART = "fct_serving_unit_cost_daily"


def _has_mart(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute("select count(*) from information_schema.tables where table_name = ?", [MART]).fetchone()
    return bool(row and row[0])


def unit_costs(con: duckdb.DuckDBPyConnection, start: date, end: date, *, teams: Sequence[str] | None = None,
               workload: tuple[str, str, str, str] | None = None) -> list[dict[str, Any]]:
    """Per (cluster, namespace, workload_kind, workload, model) over days [start, end): matched rows only,
    highest cost first. ``teams`` limits to those teams; ``workload`` = (cluster, namespace, kind, name)."""
    if not _has_mart(con):
        return []
    where, params = ["matched", "day >= ?", "day < ?"], list[object]([start, end])
    if teams is not None:
        where.append(f"team in ({', '.join('?' for _ in teams) or 'null'})")
        params += list(teams)
    if workload is not None:
        where.append("cluster = ? and namespace = ? and workload_kind = ? and workload = ?")
        params += list(workload)
    cur = con.execute(
        f"""select cluster, namespace, workload_kind, workload, model, max(team) as team,
                   sum(requests) as requests, sum(tokens) as tokens, sum(cost_usd) as cost_usd,
                   sum(idle_cost_usd) as idle_cost_usd,
                   sum(shared_cost_usd) + sum(unallocated_share_usd) as shared_cost_usd
            from {MART} where {' and '.join(where)}
            group by 1, 2, 3, 4, 5 order by cost_usd desc nulls last, workload, model""",
        params,
    )
    names = [d[0] for d in cur.description]
    out = []
    for row in cur.fetchall():
        rec = dict(zip(names, row, strict=True))
        cost, requests, tokens = rec["cost_usd"], rec["requests"], rec["tokens"]
        rec["cost_per_1k_requests"] = cost / requests * 1e3 if cost is not None and requests else None
        rec["cost_per_1m_tokens"] = cost / tokens * 1e6 if cost is not None and tokens else None
        out.append(rec)
    return out


def workload_unit_cost(con: duckdb.DuckDBPyConnection, workload: tuple[str, str, str, str],
                       start: date, end: date) -> dict[str, Any]:
    """The API's fields for one workload over [start, end): null rates when it served no counted request."""
    rows = unit_costs(con, start, end, workload=workload)
    requests = sum(r["requests"] or 0 for r in rows)
    tokens = sum(r["tokens"] or 0 for r in rows)
    cost = sum(r["cost_usd"] or 0 for r in rows)
    return {
        "requests": int(requests) if rows else None,
        "tokens": int(tokens) if rows else None,
        "cost_per_1k_requests": round(cost / requests * 1e3, 6) if requests else None,
        "cost_per_1m_tokens": round(cost / tokens * 1e6, 6) if tokens else None,
        "models": [r["model"] for r in rows],
    }


def unmatched_requests(con: duckdb.DuckDBPyConnection, start: date, end: date,
                       namespaces: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Requests of series that matched no pod, per (cluster, namespace, model), over days [start, end)."""
    if not _has_mart(con):
        return []
    where, params = ["not matched", "day >= ?", "day < ?"], list[object]([start, end])
    if namespaces is not None:
        where.append(f"namespace in ({', '.join('?' for _ in namespaces) or 'null'})")
        params += list(namespaces)
    cur = con.execute(
        f"""select cluster, namespace, model, sum(requests) as requests, sum(tokens) as tokens
            from {MART} where {' and '.join(where)} group by 1, 2, 3 order by requests desc nulls last""",
        params,
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
