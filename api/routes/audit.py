"""``GET /v1/audit``: the append-only audit log (admin/finance: all; teams: their changes' entries),
and ``GET /v1/audit/verify`` (platform admins): the hash chain checked end to end."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from api.deps import ActorDep, CtxDep
from api.errors import PROBLEM_RESPONSES, ApiError
from changes import audit as audit_log

__all__ = ["router"]

router = APIRouter(prefix="/v1/audit", tags=["audit"], responses=PROBLEM_RESPONSES)


@router.get("", summary="Audit entries the caller may see, newest first")
def list_audit(
    ctx: CtxDep, actor: ActorDep,
    change_id: Annotated[str | None, Query(max_length=32)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    if change_id is not None:
        ctx.service.get(change_id, actor=actor)  # NotFound for another team's change
    entries = ctx.service.audit(actor=actor, change_id=change_id, limit=limit)
    return {"items": [e.to_dict() for e in entries]}


@router.get("/verify", summary="Check the audit log's hash chain (platform-admin)")
def verify_audit(ctx: CtxDep, actor: ActorDep) -> dict[str, Any]:
    if not actor.is_admin:
        raise ApiError(403, "verifying the audit log needs the platform-admin role")
    report = audit_log.verify(ctx.engine)
    return {"ok": report.ok, "rows": report.rows, "problems": list(report.problems)}
