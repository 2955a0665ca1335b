"""``/healthz`` (no auth: app DB and warehouse readable) and ``/metrics`` (Prometheus text format)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy import text

from api.deps import CtxDep
from api.errors import ApiError
from api.metrics import CONTENT_TYPE

__all__ = ["router"]

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness/readiness: the app DB and the warehouse can be read")
def healthz(ctx: CtxDep) -> JSONResponse:
    checks: dict[str, Any] = {}
    checks_version = None
    try:
        with ctx.engine.connect() as conn:
            conn.execute(text("select 1")).scalar_one()
        checks["app_db"] = "ok"
    except Exception as exc:  # noqa: BLE001 - a health check reports, it does not raise
        checks["app_db"] = f"error: {type(exc).__name__}: {exc}"
    try:
        ctx.warehouse.readable()
        checks["warehouse"] = "ok"
        checks_version = ctx.warehouse.version()
    except Exception as exc:  # noqa: BLE001
        checks["warehouse"] = f"error: {type(exc).__name__}: {exc}"
    ok = all(v == "ok" for v in checks.values())
    body = {"status": "ok" if ok else "degraded", **checks}
    if ok:
        body["warehouse_version"] = checks_version  # the published build the API serves
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/metrics", summary="Request counts and latency histograms (Prometheus text format)",
            response_class=PlainTextResponse)
def metrics(request: Request, ctx: CtxDep) -> PlainTextResponse:
    if ctx.api.metrics_require_auth:
        actor = ctx.auth.authenticate(request.headers.get("authorization"))
        if not actor.is_admin:
            raise ApiError(403, "/metrics needs the platform-admin role (api.metrics_require_auth)")
    return PlainTextResponse(ctx.metrics.render(), media_type=CONTENT_TYPE)
