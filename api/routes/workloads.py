"""PRODUCT.md's workload endpoints: register, change autoscaling, read cost + rightsizing, request a rightsizing.

Workload ids (``wl_`` + 12 hex) come from ``gpufinops.appdb.ids.workload_id`` over (cluster, namespace,
kind, name), so workloads registered here and those the warehouse discovered share one id space. A team
token sees only its teams' workloads: another team's id answers 404, exactly like an unknown id.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from api.deps import ActorDep, ApiContext, CtxDep, require_writer
from api.errors import PROBLEM_RESPONSES, ApiError
from api.response_cache import CachedBody, app_db_generation
from api.routes._common import (
    NAME_PATTERN,
    WORKLOAD_ID_PATTERN,
    IdempotencyKey,
    WorkloadView,
    answer,
    find_workload,
    json_body,
    open_recommendations_of,
    resolve_workload,
    run_idempotent,
)
from api.warehouse import parse_window
from changes.model import Actor
from gpufinops.appdb.ids import workload_id
from gpufinops.appdb.schema import workloads
from gpufinops.errors import ConfigError, Conflict, NotFound

__all__ = ["router", "WorkloadIn", "AutoscalingIn", "RightsizingIn", "rightsizing_summary"]

router = APIRouter(prefix="/v1/workloads", tags=["workloads"], responses=PROBLEM_RESPONSES)

WorkloadId = Annotated[str, Path(pattern=WORKLOAD_ID_PATTERN, description="wl_ + 12 hex digits")]
_GIB = 1024.0**3
# kinds whose pod template the controller can patch
_PATCHABLE = ("Deployment", "StatefulSet", "Job", "CronJob")


class WorkloadIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(max_length=253, pattern=NAME_PATTERN)
    image: str = Field(min_length=1, max_length=1024, pattern=r"^\S+$")
    cpu: float = Field(gt=0, le=1024, description="CPU cores requested per replica")
    mem_gb: float = Field(gt=0, le=16384, description="memory GiB requested per replica")
    min_replicas: int = Field(ge=0, le=10000)
    max_replicas: int = Field(ge=1, le=10000)
    scale_metric: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:/-]+$")
    budget_usd_day: float = Field(ge=0, le=1e9)
    namespace: str | None = Field(default=None, max_length=63, pattern=NAME_PATTERN,
                                  description="default: the first namespace of the caller's team")
    cluster: str | None = Field(default=None, max_length=255, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                                description="default: the namespace's cluster")
    kind: Literal["Deployment", "StatefulSet"] = "Deployment"

    @model_validator(mode="after")
    def _replicas(self) -> WorkloadIn:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} is above max_replicas {self.max_replicas}")
        return self


class AutoscalingIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    min: int = Field(ge=1, le=10000)
    max: int = Field(ge=1, le=10000)
    target_rps: float | None = Field(default=None, gt=0, le=1e7)
    ticket: str | None = Field(default=None, max_length=255)
    reason: str | None = Field(default=None, max_length=2000)

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingIn:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class RightsizingIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    cpu: float = Field(gt=0, le=1024, description="CPU cores to request")
    mem_gb: float = Field(gt=0, le=16384, description="memory GiB to request")
    ticket: str = Field(min_length=1, max_length=255, description="e.g. COST-123 (the policy's ticket_pattern)")
    container: str | None = Field(default=None, max_length=253, pattern=NAME_PATTERN)
    reason: str | None = Field(default=None, max_length=2000)


def _place(ctx: ApiContext, actor: Actor, body: WorkloadIn) -> tuple[str, str, str | None]:
    """(cluster, namespace, team) for a new workload; another team's namespace is NotFound."""
    try:
        known = ctx.warehouse.namespaces()
    except ConfigError:
        known = []
    mine = actor.member_teams
    if body.namespace is None:
        candidates = [(c, n, t) for c, n, t in known
                      if t in mine and (body.cluster is None or c == body.cluster)]
        if not candidates:
            raise ApiError(422, "namespace is required: no namespace of "
                                f"{', '.join(sorted(mine)) or 'your teams'} is known to the warehouse")
        return candidates[0]
    matches = [(c, n, t) for c, n, t in known if n == body.namespace and (body.cluster is None or c == body.cluster)]
    if matches:
        cluster, ns, team = matches[0]
    else:
        cluster_opt = body.cluster or next((c for c, _, _ in known), None)
        if cluster_opt is None:
            raise ApiError(422, f"cluster is required: namespace {body.namespace} is not in the warehouse")
        cluster, ns = cluster_opt, body.namespace
        team = ctx.team_of(cluster, ns)
    if not actor.is_admin and (team is None or team not in mine):
        raise NotFound(f"namespace {body.namespace} not found among your teams' namespaces")
    return cluster, ns, team


@router.post("", status_code=201, summary="Register a workload with its budget")
def create_workload(body: WorkloadIn, request: Request, ctx: CtxDep, actor: ActorDep,
                    idempotency_key: IdempotencyKey = None) -> JSONResponse:
    require_writer(actor)

    def work() -> tuple[int, dict[str, Any]]:
        cluster, ns, team = _place(ctx, actor, body)
        wid = workload_id(cluster, ns, body.kind, body.name)
        now = ctx.clock()
        try:
            with ctx.engine.begin() as conn:
                conn.execute(workloads.insert().values(
                    id=wid, cluster=cluster, namespace=ns, name=body.name, kind=body.kind, team=team,
                    image=body.image, cpu=body.cpu, mem_gb=body.mem_gb, min_replicas=body.min_replicas,
                    max_replicas=body.max_replicas, scale_metric=body.scale_metric, target_rps=None,
                    budget_usd_day=round(body.budget_usd_day, 2), version=1, created_by=actor.name,
                    created_at=now, updated_at=now,
                ))
        except IntegrityError as exc:
            raise Conflict(f"workload {body.kind}/{body.name} in {cluster}/{ns} is already registered as {wid}") \
                from exc
        return 201, {"workload_id": wid, "cluster": cluster, "namespace": ns, "kind": body.kind,
                     "name": body.name, "team": team, "version": 1}

    return run_idempotent(ctx, actor, request, idempotency_key, body.model_dump(), work)


@router.get("", summary="Workloads the caller can see (registered and discovered)")
def list_workloads(
    ctx: CtxDep, actor: ActorDep,
    namespace: Annotated[str | None, Query(max_length=253)] = None,
    cluster: Annotated[str | None, Query(max_length=255)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict[str, Any]:
    with ctx.engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(select(workloads)).mappings()]
    try:
        discovered = ctx.warehouse.workload_index()
    except ConfigError:
        discovered = {}
    items: dict[str, WorkloadView] = {}
    for r in rows:
        team = r["team"] or ctx.team_of(r["cluster"], r["namespace"])
        items[r["id"]] = WorkloadView(r["id"], r["cluster"], r["namespace"], r["kind"], r["name"], team, r,
                                      discovered.get(r["id"]))
    for wid, ref in discovered.items():
        if wid not in items:
            items[wid] = WorkloadView(wid, ref.cluster, ref.namespace, ref.kind, ref.name,
                                      ref.team or ctx.team_of(ref.cluster, ref.namespace), None, ref)
    visible = sorted(
        (w for w in items.values() if actor.can_see_team(w.team)
         and (namespace is None or w.namespace == namespace) and (cluster is None or w.cluster == cluster)),
        key=lambda w: (w.cluster, w.namespace, w.kind, w.name),
    )
    return {"total": len(visible), "items": [w.to_dict() for w in visible[offset:offset + limit]]}


@router.get("/{workload_id}", summary="One workload")
def get_workload(workload_id: WorkloadId, ctx: CtxDep, actor: ActorDep) -> dict[str, Any]:
    return resolve_workload(ctx, actor, workload_id).to_dict()


@router.put("/{workload_id}/autoscaling", summary="Change a workload's autoscaling (proposes a change)")
def put_autoscaling(workload_id: WorkloadId, body: AutoscalingIn, ctx: CtxDep, actor: ActorDep) -> dict[str, Any]:
    require_writer(actor)
    wl = resolve_workload(ctx, actor, workload_id)
    reg = wl.registered or {}
    change = None
    skipped = None
    if ctx.policy.ticket_ok(body.ticket):
        change = ctx.service.create(
            actor=actor, kind="set_autoscaling", cluster=wl.cluster, namespace=wl.namespace,
            target_kind="HorizontalPodAutoscaler", target_name=wl.name,
            current={"min_replicas": reg.get("min_replicas"), "max_replicas": reg.get("max_replicas"),
                     "target_rps": reg.get("target_rps"), "workload_kind": wl.kind, "workload": wl.name},
            proposed={"min_replicas": body.min, "max_replicas": body.max, "target_rps": body.target_rps,
                      "workload_kind": wl.kind, "workload": wl.name},
            ticket=body.ticket, reason=body.reason or "autoscaling set through the API",
            evidence={"source": "api", "workload_id": wl.id}, evidence_at=ctx.clock(),
        )
    else:
        # the registry records the desired autoscaling; reaching the cluster needs a change, which
        # the policy only accepts with a ticket
        skipped = (f"no change proposed: the policy requires a ticket matching {ctx.policy.ticket_pattern!r}; "
                   "PUT again with \"ticket\" to propose the set_autoscaling change")
    now = ctx.clock()
    with ctx.engine.begin() as conn:
        if wl.registered is None:
            version = 1
            conn.execute(workloads.insert().values(
                id=wl.id, cluster=wl.cluster, namespace=wl.namespace, name=wl.name, kind=wl.kind, team=wl.team,
                min_replicas=body.min, max_replicas=body.max, target_rps=body.target_rps, version=version,
                created_by=actor.name, created_at=now, updated_at=now,
            ))
        else:
            conn.execute(update(workloads).where(workloads.c.id == wl.id).values(
                min_replicas=body.min, max_replicas=body.max, target_rps=body.target_rps,
                version=workloads.c.version + 1, updated_at=now))
            version = int(conn.execute(select(workloads.c.version).where(workloads.c.id == wl.id)).scalar_one())
    out: dict[str, Any] = {"workload_id": wl.id, "version": version,
                           "change_id": change.id if change else None,
                           "change_status": change.status if change else None}
    if skipped:
        out["change_skipped"] = skipped
    return out


def rightsizing_summary(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``rightsizing`` object of the cost API from a workload's open recommendations."""
    cpu_mem = [r for r in recs if r["kind"] == "rightsize_cpu_mem"]
    containers = []
    for r in cpu_mem:
        p = r.get("proposed") or {}
        cpu = (p.get("cpu") or {}).get("target") if isinstance(p.get("cpu"), dict) else p.get("cpu")
        mem = (p.get("memory") or {}).get("target") if isinstance(p.get("memory"), dict) else p.get("memory")
        containers.append({
            "container": p.get("container"),
            "cpu": round(float(cpu), 3) if cpu is not None else None,
            "mem_gb": round(float(mem) / _GIB, 3) if mem is not None else None,
            "recommendation_id": r["id"],
            "est_monthly_savings_usd": r["est_monthly_savings_usd"],
        })
    first = containers[0] if containers else {}
    return {
        "cpu": first.get("cpu"),
        "mem_gb": first.get("mem_gb"),
        "container": first.get("container"),
        "recommendation_id": first.get("recommendation_id"),
        "containers": containers,
        "gpu": [{"kind": r["kind"], "recommendation_id": r["id"], "proposed": r["proposed"],
                 "est_monthly_savings_usd": r["est_monthly_savings_usd"], "confidence": r["confidence"],
                 "risk": r["risk"]} for r in recs if r["kind"] != "rightsize_cpu_mem"],
        "est_monthly_savings_usd": round(sum(float(r["est_monthly_savings_usd"] or 0) for r in recs), 2),
    }


def _cost_body(ctx: ApiContext, workload_id: str, text: str, route: Any = None) -> tuple[CachedBody, bool]:
    """The cost answer, serialised: the app DB's registry row and open recommendations (read under the
    app DB generation taken first), then cost and serving unit cost from one warehouse snapshot."""
    delta = parse_window(text)
    generation = app_db_generation()
    wl = find_workload(ctx, workload_id)
    recs = open_recommendations_of(ctx, wl)
    stamp, cost, serving = ctx.warehouse.workload_cost_view(wl.cluster, wl.namespace, wl.kind, wl.name, delta)
    out: dict[str, Any] = {"workload_id": wl.id, "cluster": wl.cluster, "namespace": wl.namespace,
                           "kind": wl.kind, "name": wl.name, "team": wl.team, "window": text, **cost}
    out["serving"] = serving
    out["cost_per_1k_requests"] = serving["cost_per_1k_requests"]
    out["cost_per_1m_tokens"] = serving["cost_per_1m_tokens"]
    budget = (wl.registered or {}).get("budget_usd_day")
    if budget is not None:
        days = delta.total_seconds() / 86400.0
        out["budget_usd"] = round(float(budget) * days, 2)
    out["rightsizing"] = rightsizing_summary(recs)
    return CachedBody(json_body(out), stamp, team=wl.team, generation=generation,
                      expires=time.monotonic() + ctx.api.app_db_cache_s, check_team=True,
                      route=route), ctx.api.app_db_cache_s > 0


@router.get("/{workload_id}/cost", summary="Cost, idle share and rightsizing of a workload",
            response_model=dict[str, Any])
async def get_cost(
    request: Request, workload_id: WorkloadId, ctx: CtxDep, actor: ActorDep,
    window: Annotated[str | None, Query(max_length=8, pattern=r"^[1-9][0-9]{0,4}[hdw]$",
                                        description="e.g. 24h, 7d, 2w (ends at the warehouse's last hour)")] = None,
) -> Response:
    """Answered from the response cache while the warehouse version is the same and the app DB has not
    changed (api/response_cache.py); a miss reads both in the threadpool. Another team's workload is 404,
    exactly like an unknown id, whether cached or not."""
    text = window or ctx.api.default_cost_window
    hit = await answer(ctx, ("cost", workload_id, text),
                       lambda: _cost_body(ctx, workload_id, text, request.scope.get("route")), request, actor)
    if not actor.can_see_team(hit.team):
        raise NotFound(f"workload {workload_id} not found")
    return Response(hit.body, media_type="application/json")


@router.post("/{workload_id}/rightsizing:apply", status_code=202,
             summary="Request a CPU/memory rightsizing (proposes a change for approval)")
def apply_rightsizing(workload_id: WorkloadId, body: RightsizingIn, request: Request, ctx: CtxDep,
                      actor: ActorDep, idempotency_key: IdempotencyKey = None) -> JSONResponse:
    require_writer(actor)
    wl = resolve_workload(ctx, actor, workload_id)
    if not ctx.policy.ticket_ok(body.ticket):
        raise ApiError(422, f"ticket {body.ticket!r} does not match the policy's ticket_pattern "
                            f"{ctx.policy.ticket_pattern!r}", title="Refused by policy", gate="ticket")
    if wl.kind not in _PATCHABLE:
        raise ApiError(422, f"workload {wl.id} is a {wl.kind}; CPU/memory can be changed on "
                            f"{', '.join(_PATCHABLE)} only")

    def work() -> tuple[int, dict[str, Any]]:
        recs = [r for r in open_recommendations_of(ctx, wl) if r["kind"] == "rightsize_cpu_mem"]
        rec = next((r for r in recs if body.container is None
                    or (r.get("proposed") or {}).get("container") == body.container), None)
        reg = wl.registered or {}
        current: dict[str, Any] = {"cpu": reg.get("cpu"), "mem_gb": reg.get("mem_gb")}
        if rec is not None:
            current.update(rec.get("current") or {})
        proposed: dict[str, Any] = {"cpu": body.cpu, "mem_gb": body.mem_gb}
        container = body.container or ((rec or {}).get("proposed") or {}).get("container")
        if container:
            proposed["container"] = container
        change = ctx.service.create(
            actor=actor, kind="rightsize_cpu_mem", cluster=wl.cluster, namespace=wl.namespace,
            target_kind=wl.kind, target_name=wl.name, current=current, proposed=proposed, ticket=body.ticket,
            reason=body.reason or "rightsizing requested through the API",
            evidence=(rec or {}).get("evidence") or {"source": "api", "workload_id": wl.id},
            evidence_at=ctx.clock(), recommendation_id=(rec or {}).get("id"),
        )
        return 202, {"change_id": change.id, "status": change.status, "workload_id": wl.id}

    return run_idempotent(ctx, actor, request, idempotency_key, {"workload_id": workload_id, **body.model_dump()},
                          work)
