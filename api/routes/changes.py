"""The change queue: list, show, approve, reject, apply (or dry-run), roll back.

Gates are the service's (``changes.service.ChangeService``): another team's change is 404, a missing
approver role 403, a wrong status or stale version 409, a policy gate 409 with ``gate`` naming it
(self-approval ``four_eyes``, outside a window ``window``, ``blast_radius``, ``paused``, ...). Apply and
rollback go through the controller's ``Executor`` against the configured Kubernetes target.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from api.deps import ActorDep, CtxDep, require_writer
from api.errors import PROBLEM_RESPONSES
from api.routes._common import IdempotencyKey, run_idempotent
from changes.model import STATUSES

__all__ = ["router", "DecisionIn", "RejectIn", "ApplyIn", "RollbackIn"]

router = APIRouter(prefix="/v1/changes", tags=["changes"], responses=PROBLEM_RESPONSES)
ChangeId = Annotated[str, Path(pattern=r"^chg_[0-9a-f]{12}$", description="chg_ + 12 hex digits")]
_STATUS_PATTERN = "^(" + "|".join(STATUSES) + ")$"


class DecisionIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str | None = Field(default=None, max_length=2000)
    resource_version: str | None = Field(default=None, max_length=64,
                                         description="the target's resourceVersion the approver looked at")


class RejectIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = Field(min_length=1, max_length=2000)


class ApplyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    dry_run: bool = False


class RollbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = Field(min_length=1, max_length=2000)


@router.get("", summary="Changes the caller can see")
def list_changes(
    ctx: CtxDep, actor: ActorDep,
    status: Annotated[str | None, Query(pattern=_STATUS_PATTERN)] = None,
    kind: Annotated[str | None, Query(max_length=64)] = None,
    cluster: Annotated[str | None, Query(max_length=255)] = None,
    namespace: Annotated[str | None, Query(max_length=255)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict[str, Any]:
    items = ctx.service.list(actor=actor, status=status, kind=kind, cluster=cluster, namespace=namespace,
                             limit=limit, offset=offset)
    return {"items": [c.to_dict() for c in items]}


@router.get("/{change_id}", summary="One change with its approvals and, once applied, its outcome")
def get_change(change_id: ChangeId, ctx: CtxDep, actor: ActorDep) -> dict[str, Any]:
    """``outcome``: the change's row of the warehouse's ``fct_change_outcomes`` (cost, GPU-hours, idle %
    and requests before and after, realized against estimated monthly savings, regression flags);
    null before the change was applied and exported, or without a warehouse."""
    change = ctx.service.get(change_id, actor=actor).to_dict()  # NotFound for a change the caller cannot see
    change["outcome"] = _outcome(ctx, change_id) if change["applied_at"] else None
    return change


def _outcome(ctx: Any, change_id: str) -> dict[str, Any] | None:
    from gpufinops.errors import ConfigError
    from gpufinops.views.queries import change_outcome

    try:
        with ctx.warehouse.connection() as cur:
            return change_outcome(cur, change_id)
    except ConfigError:  # no warehouse built yet
        return None


def _post(ctx: Any, actor: Any, request: Request, key: str | None, body: BaseModel, status: int,
          work: Any) -> JSONResponse:
    require_writer(actor)
    return run_idempotent(ctx, actor, request, key, body.model_dump(), lambda: (status, work()))


@router.post("/{change_id}:approve", summary="Approve a change (never your own)")
def approve(change_id: ChangeId, request: Request, ctx: CtxDep, actor: ActorDep, body: DecisionIn | None = None,
            idempotency_key: IdempotencyKey = None) -> JSONResponse:
    b = body or DecisionIn()
    return _post(ctx, actor, request, idempotency_key, b, 200, lambda: ctx.service.approve(
        change_id, actor=actor, reason=b.reason or "approved through the API", resource_version=b.resource_version).to_dict())


@router.post("/{change_id}:reject", summary="Reject a change")
def reject(change_id: ChangeId, body: RejectIn, request: Request, ctx: CtxDep, actor: ActorDep,
           idempotency_key: IdempotencyKey = None) -> JSONResponse:
    return _post(ctx, actor, request, idempotency_key, body, 200,
                 lambda: ctx.service.reject(change_id, actor=actor, reason=body.reason).to_dict())


@router.post("/{change_id}:apply", summary="Apply an approved change, or show its plan with dry_run")
def apply(change_id: ChangeId, request: Request, ctx: CtxDep, actor: ActorDep, body: ApplyIn | None = None,
          idempotency_key: IdempotencyKey = None) -> JSONResponse:
    b = body or ApplyIn()
    require_writer(actor)
    ctx.service.get(change_id, actor=actor)  # 404 before any Kubernetes call for an invisible change

    def work() -> dict[str, Any]:
        executor = ctx.executor()
        if b.dry_run:
            from controller.planner import format_plan

            ops = executor.dry_run(change_id, actor)
            return {"change_id": change_id, "dry_run": True, "plan": [op.to_dict() for op in ops],
                    "plan_text": format_plan(ops)}
        return dict(executor.apply(change_id, actor).to_dict())

    if b.dry_run:  # no state change: nothing to make idempotent
        return JSONResponse(work())
    return _post(ctx, actor, request, idempotency_key, b, 200, work)


@router.post("/{change_id}:rollback", summary="Roll back an applied, verified or failed change")
def rollback(change_id: ChangeId, body: RollbackIn, request: Request, ctx: CtxDep, actor: ActorDep,
             idempotency_key: IdempotencyKey = None) -> JSONResponse:
    require_writer(actor)
    ctx.service.get(change_id, actor=actor)
    return _post(ctx, actor, request, idempotency_key, body, 200,
                 lambda: ctx.executor().rollback(change_id, actor, body.reason).to_dict())
