"""Helpers the routers share: idempotent POSTs, workload and recommendation lookups scoped to the actor."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Header, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from sqlalchemy import select

from api.deps import ApiContext
from api.response_cache import CachedBody, request_key, view_of
from api.warehouse import WorkloadRef
from changes import idempotency
from changes.model import Actor
from gpufinops.appdb import as_utc
from gpufinops.appdb.schema import recommendations, workloads
from gpufinops.errors import ConfigError, NotFound
from gpufinops.warehouse import Stamp

__all__ = [
    "IdempotencyKey",
    "answer",
    "json_body",
    "run_idempotent",
    "WorkloadView",
    "resolve_workload",
    "find_workload",
    "open_recommendations_of",
    "recommendation_team",
    "rec_to_dict",
    "WORKLOAD_ID_PATTERN",
    "NAME_PATTERN",
]

WORKLOAD_ID_PATTERN = r"^wl_[0-9a-f]{12}$"
# Kubernetes object and namespace names (DNS-1123 label / subdomain, lower case)
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"

IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", min_length=1, max_length=255, pattern=r"^[\x21-\x7e]+$",
           description="Retry-safe POST: the same key and body replay the first response; "
                       "the same key with another body is 409."),
]


def json_body(payload: Any) -> bytes:
    """``payload`` serialised exactly as FastAPI serialises a returned value (jsonable_encoder, then
    JSONResponse's compact UTF-8 JSON), once, for the response cache."""
    return bytes(JSONResponse(jsonable_encoder(payload)).body)


async def answer(ctx: ApiContext, key: Hashable, compute: Callable[[], tuple[CachedBody, bool]],
                 request: Request | None = None, actor: Actor | None = None) -> CachedBody:
    """The cached answer for ``key`` if it is of the live warehouse version, else ``compute``'s (in the
    threadpool, once for all the requests asking meanwhile; see ``ResponseCache.answer``). With
    ``request`` and ``actor`` the answer is also kept under the request as it arrived, for
    ``CachedReadMiddleware``."""
    try:
        stamp: Stamp | None = ctx.warehouse.reader.stamp()  # a realpath and two stats: fine on the loop
    except ConfigError:
        stamp = None  # no warehouse yet: compute, so the route's own error is raised
    raw = request_key(request.scope, view_of(actor)) if request is not None and actor is not None else None
    return await ctx.responses.answer(key, stamp, compute, raw)


def run_idempotent(ctx: ApiContext, actor: Actor, request: Request, key: str | None, body: Any,
                   work: Callable[[], tuple[int, dict[str, Any]]]) -> JSONResponse:
    """Run ``work`` once per (actor, Idempotency-Key); replay its stored response for a retry."""
    if key is None:
        status, payload = work()
        return JSONResponse(payload, status_code=status)
    method_path = f"{request.method} {request.url.path}"
    digest = idempotency.request_hash({"method_path": method_path, "body": body})
    hit = idempotency.lookup(ctx.engine, actor=actor.name, key=key, method_path=method_path, request_hash=digest)
    if hit is not None:
        return JSONResponse(hit.response, status_code=hit.status_code, headers={"Idempotent-Replayed": "true"})
    status, payload = work()
    stored = idempotency.save(ctx.engine, actor=actor.name, key=key, method_path=method_path,
                              request_hash=digest, response=payload, status_code=status, at=ctx.clock())
    return JSONResponse(stored.response, status_code=stored.status_code)


@dataclass(frozen=True)
class WorkloadView:
    id: str
    cluster: str
    namespace: str
    kind: str
    name: str
    team: str | None
    registered: dict[str, Any] | None
    discovered: WorkloadRef | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workload_id": self.id, "cluster": self.cluster, "namespace": self.namespace,
                               "kind": self.kind, "name": self.name, "team": self.team,
                               "registered": self.registered is not None, "discovered": self.discovered is not None}
        if self.registered is not None:
            r = self.registered
            out.update({k: r[k] for k in ("image", "cpu", "mem_gb", "min_replicas", "max_replicas", "scale_metric",
                                          "target_rps", "budget_usd_day", "version", "created_by")})
            out["budget_usd_day"] = None if r["budget_usd_day"] is None else round(float(r["budget_usd_day"]), 2)
        if self.discovered is not None:
            out.update(tenant=self.discovered.tenant, tier=self.discovered.tier)
        return out


def _discovered(ctx: ApiContext) -> dict[str, WorkloadRef]:
    try:
        return ctx.warehouse.workload_index()
    except ConfigError:
        return {}  # no warehouse yet: only registered workloads exist


def find_workload(ctx: ApiContext, wid: str) -> WorkloadView:
    """The workload ``wid`` (registered or discovered), whoever asks; NotFound when absent."""
    with ctx.engine.connect() as conn:
        row = conn.execute(select(workloads).where(workloads.c.id == wid)).mappings().first()
    ref = _discovered(ctx).get(wid)
    if row is None and ref is None:
        raise NotFound(f"workload {wid} not found")
    if row is not None:
        cluster, ns, kind, name = row["cluster"], row["namespace"], row["kind"], row["name"]
        team = row["team"] or (ref.team if ref else None)
    else:
        assert ref is not None
        cluster, ns, kind, name, team = ref.cluster, ref.namespace, ref.kind, ref.name, ref.team
    if team is None:
        team = ctx.team_of(cluster, ns)
    return WorkloadView(id=wid, cluster=cluster, namespace=ns, kind=kind, name=name, team=team,
                        registered=dict(row) if row is not None else None, discovered=ref)


def resolve_workload(ctx: ApiContext, actor: Actor, wid: str) -> WorkloadView:
    """The workload ``wid`` (registered or discovered); NotFound when absent or another team's."""
    wl = find_workload(ctx, wid)
    if not actor.can_see_team(wl.team):
        raise NotFound(f"workload {wid} not found")
    return wl


def open_recommendations_of(ctx: ApiContext, wl: WorkloadView) -> list[dict[str, Any]]:
    t = recommendations
    with ctx.engine.connect() as conn:
        rows = conn.execute(
            select(t).where(t.c.status == "open", t.c.cluster == wl.cluster, t.c.namespace == wl.namespace,
                            t.c.workload == wl.name).order_by(t.c.est_monthly_savings_usd.desc(), t.c.id)
        ).mappings().all()
    return [rec_to_dict(r) for r in rows]


def recommendation_team(ctx: ApiContext, rec: dict[str, Any]) -> str | None:
    if rec.get("namespace") is None:
        return None
    return ctx.team_of(rec["cluster"], rec["namespace"])


def _iso(v: Any) -> Any:
    if isinstance(v, datetime | str):
        when = as_utc(datetime.fromisoformat(v) if isinstance(v, str) else v)
        return when.isoformat() if when is not None else None
    return v


def rec_to_dict(row: Any) -> dict[str, Any]:
    d = dict(row)
    for k in ("created_at", "updated_at", "last_seen_at", "resolved_at"):
        if k in d:
            d[k] = _iso(d[k])
    if d.get("est_monthly_savings_usd") is not None:
        d["est_monthly_savings_usd"] = round(float(d["est_monthly_savings_usd"]), 2)
    return d
