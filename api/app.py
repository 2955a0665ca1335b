"""``create_app(settings)``: the FastAPI app over the app DB (changes, recommendations, workloads) and the
warehouse (cost, showback, capacity), with auth, problem+json errors, a body size limit and metrics.

Interactive docs at ``/docs``, the schema at ``/openapi.json``. ``gpufinops serve api`` runs it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import Authenticator
from api.config import ApiSettings, load_api_settings
from api.deps import ApiContext
from api.errors import install_error_handlers, problem
from api.metrics import Metrics, MetricsMiddleware
from api.response_cache import CachedReadMiddleware, ResponseCache
from api.routes import ROUTERS
from api.warehouse import WarehouseReader
from changes.policy import Policy
from changes.service import ChangeService
from changes.teams import TeamOf, warehouse_team_resolver
from gpufinops.appdb import open_app_db
from gpufinops.settings import Settings

__all__ = ["create_app", "BodyLimitMiddleware", "refreshing_team_resolver"]

API_VERSION = "1"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def refreshing_team_resolver(warehouse_path: str) -> TeamOf:
    """``changes.teams.warehouse_team_resolver``, rebuilt when a build publishes a new version."""
    lock = threading.Lock()
    state: dict[str, Any] = {"stamp": None, "resolver": None}

    def stamp() -> tuple[int, int] | None:
        try:
            st = os.stat(warehouse_path)  # follows the link to the published version
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns)

    def team_of(cluster: str | None, namespace: str | None) -> str | None:
        now = stamp()
        with lock:
            if state["resolver"] is None or state["stamp"] != now:
                state["resolver"] = warehouse_team_resolver(warehouse_path)
                state["stamp"] = now
            resolver: TeamOf = state["resolver"]
        return resolver(cluster, namespace)

    return team_of


class BodyLimitMiddleware:
    """413 for a request body above ``limit`` bytes (declared or streamed), before any handler parses it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        detail = f"the request body is larger than the limit of {self.limit} bytes (api.max_body_bytes)"
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.limit
            except ValueError:
                too_big = False
            if too_big:
                await problem(413, detail)(scope, receive, send)
                return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(detail)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if started:
                raise
            await problem(413, detail)(scope, receive, send)


class _TooLarge(StarletteHTTPException):
    """A streamed (chunked) body passed the limit. An HTTPException, so that FastAPI's body parser,
    which turns any other error while reading the body into a 400, lets it through as a 413."""

    def __init__(self, detail: str) -> None:
        super().__init__(status_code=413, detail=detail)


def create_app(
    settings: Settings,
    *,
    api_settings: ApiSettings | None = None,
    kube_factory: Callable[[], Any] | None = None,
    clock: Callable[[], datetime] | None = None,
) -> FastAPI:
    """The API app. ``kube_factory`` overrides the Kubernetes client of apply/rollback (tests pass the
    replay server's); ``clock`` overrides the change service's clock (tests of windows and expiry)."""
    api = api_settings or load_api_settings(settings)
    clock = clock or _utcnow
    engine = open_app_db(settings.effective_app_db_url)
    policy = Policy.load(getattr(settings, "change_policy", None))
    warehouse_path = str(settings.warehouse_path)
    team_of = refreshing_team_resolver(warehouse_path)
    service = ChangeService(engine, policy, team_of=team_of, clock=clock)
    metrics = Metrics()
    if kube_factory is None:
        def kube_factory() -> Any:
            from controller.kube import client_from

            return client_from(api.kubeconfig, api.kube_context)

    ctx = ApiContext(
        settings=settings, api=api, engine=engine, policy=policy, service=service,
        warehouse=WarehouseReader(warehouse_path), auth=Authenticator(api, api.tokens_path(settings)),
        metrics=metrics, team_of=team_of, clock=clock, kube_factory=kube_factory,
        responses=ResponseCache(api.response_cache_size),
    )
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = api.threadpool_size
        yield
        ctx.warehouse.close()
        engine.dispose()

    app = FastAPI(
        lifespan=lifespan,
        title="gpufinops API",
        version=API_VERSION,
        description=(
            "GPU FinOps on Kubernetes: register workloads, change their autoscaling, read their cost and "
            "rightsizing, request changes that pass approval gates; showback, recommendations, the change "
            "queue and its audit log. Auth: `Authorization: Bearer <token>`; roles platform-admin, finance, "
            "team-lead:<team>, member:<team>. Errors are RFC 7807 problem+json."
        ),
    )
    app.state.ctx = ctx
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    # innermost: a repeat of a cached read is answered before routing (api/response_cache.py)
    app.add_middleware(CachedReadMiddleware, ctx=ctx)
    app.add_middleware(BodyLimitMiddleware, limit=api.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)

    return app
