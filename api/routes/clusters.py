"""``GET /v1/clusters/{cluster}/binpack``: the cluster's latest fragmentation and the open consolidation moves.

Fleet-level data: platform admins and finance only (a team token gets 403).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from sqlalchemy import select

from api.deps import ActorDep, CtxDep
from api.errors import PROBLEM_RESPONSES, ApiError
from api.routes._common import rec_to_dict
from gpufinops.appdb.schema import recommendations
from gpufinops.errors import NotFound

__all__ = ["router"]

router = APIRouter(prefix="/v1/clusters", tags=["clusters"], responses=PROBLEM_RESPONSES)


@router.get("/{cluster}/binpack", summary="Fragmentation and suggested consolidation moves of a cluster")
def binpack(cluster: Annotated[str, Path(max_length=255)], ctx: CtxDep, actor: ActorDep) -> dict[str, Any]:
    if not (actor.is_admin or actor.is_finance):
        raise ApiError(403, "cluster-level data needs the platform-admin or finance role")
    cap = ctx.warehouse.capacity_latest(cluster)
    if cap is None:
        raise NotFound(f"cluster {cluster} has no capacity rows in the warehouse (fct_cluster_capacity_hourly)")
    t = recommendations
    with ctx.engine.connect() as conn:
        rows = conn.execute(select(t).where(t.c.status == "open", t.c.kind == "consolidate_nodes",
                                            t.c.cluster == cluster).order_by(t.c.id)).mappings().all()
    recs = [rec_to_dict(r) for r in rows]
    moves = sum(len((r.get("proposed") or {}).get("moves") or []) for r in recs)
    freed = sum(len((r.get("proposed") or {}).get("freed_nodes") or []) for r in recs)
    return {
        "cluster": cluster,
        "fragmentation": cap["fragmentation"],
        "suggested_moves": moves,
        "nodes_freed": freed,
        "est_monthly_savings_usd": round(sum(float(r["est_monthly_savings_usd"] or 0) for r in recs), 2),
        "recommendation_ids": [r["id"] for r in recs],
        **{k: cap[k] for k in ("hour", "gpu_capacity", "gpu_allocated", "gpu_unallocated", "fragmentation_gpus",
                               "nodes_in_use", "nodes_lower_bound")},
    }
