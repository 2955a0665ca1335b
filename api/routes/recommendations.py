"""Recommendations (scoped to the caller's teams) and proposing a change from one.

A team token sees the recommendations of its teams' namespaces; node-level ones (no namespace) are
for platform admins and finance. Another team's id answers 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from api.deps import ActorDep, CtxDep, require_writer
from api.errors import PROBLEM_RESPONSES
from api.routes._common import IdempotencyKey, rec_to_dict, recommendation_team, run_idempotent
from gpufinops.appdb.schema import recommendations
from gpufinops.errors import NotFound

__all__ = ["router", "ProposeIn"]

router = APIRouter(prefix="/v1/recommendations", tags=["recommendations"], responses=PROBLEM_RESPONSES)
RecId = Annotated[str, Path(max_length=64)]


class ProposeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ticket: str | None = Field(default=None, max_length=255)
    reason: str | None = Field(default=None, max_length=2000)


@router.get("", summary="Recommendations the caller can see")
def list_recommendations(
    ctx: CtxDep, actor: ActorDep,
    kind: Annotated[str | None, Query(max_length=64)] = None,
    cluster: Annotated[str | None, Query(max_length=255)] = None,
    namespace: Annotated[str | None, Query(max_length=255)] = None,
    status: Annotated[str | None, Query(max_length=32, description="default open; `all` for every status")] = "open",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict[str, Any]:
    t = recommendations
    q = select(t)
    if kind is not None:
        q = q.where(t.c.kind == kind)
    if cluster is not None:
        q = q.where(t.c.cluster == cluster)
    if namespace is not None:
        q = q.where(t.c.namespace == namespace)
    if status is not None and status != "all":
        q = q.where(t.c.status == status)
    q = q.order_by(t.c.est_monthly_savings_usd.desc(), t.c.id)
    with ctx.engine.connect() as conn:
        rows = [rec_to_dict(r) for r in conn.execute(q).mappings()]
    visible = []
    for r in rows:
        r["team"] = recommendation_team(ctx, r)
        if actor.can_see_team(r["team"]):
            visible.append(r)
    return {"total": len(visible), "items": visible[offset:offset + limit]}


def _get(ctx: Any, actor: Any, rec_id: str) -> dict[str, Any]:
    with ctx.engine.connect() as conn:
        row = conn.execute(select(recommendations).where(recommendations.c.id == rec_id)).mappings().first()
    if row is None:
        raise NotFound(f"recommendation {rec_id} not found")
    rec = rec_to_dict(row)
    rec["team"] = recommendation_team(ctx, rec)
    if not actor.can_see_team(rec["team"]):
        raise NotFound(f"recommendation {rec_id} not found")
    return rec


@router.get("/{rec_id}", summary="One recommendation")
def get_recommendation(rec_id: RecId, ctx: CtxDep, actor: ActorDep) -> dict[str, Any]:
    return _get(ctx, actor, rec_id)


@router.post("/{rec_id}/change", status_code=201, summary="Propose a change from a recommendation")
def propose_change(rec_id: RecId, request: Request, ctx: CtxDep, actor: ActorDep,
                   body: ProposeIn | None = None, idempotency_key: IdempotencyKey = None) -> JSONResponse:
    require_writer(actor)
    _get(ctx, actor, rec_id)
    body = body or ProposeIn()

    def work() -> tuple[int, dict[str, Any]]:
        change = ctx.service.create_from_recommendation(rec_id, actor=actor, ticket=body.ticket, reason=body.reason)
        return 201, change.to_dict()

    return run_idempotent(ctx, actor, request, idempotency_key, {"rec_id": rec_id, **body.model_dump()}, work)
