"""What every route needs: the app's context (services, warehouse, auth) and the calling actor.

``ApiContext`` is built once by ``create_app`` and kept on ``app.state``; routes take it and the
authenticated ``Actor`` through FastAPI dependencies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, cast

from fastapi import Depends, Request
from fastapi.security import HTTPBearer
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from api.auth import Authenticator
from api.config import ApiSettings
from api.errors import ApiError
from api.metrics import Metrics
from api.response_cache import ResponseCache
from api.warehouse import WarehouseReader
from changes.model import Actor
from changes.policy import Policy
from changes.service import ChangeService
from gpufinops.settings import Settings

__all__ = ["ApiContext", "get_ctx", "current_actor", "CtxDep", "ActorDep", "require_writer", "bearer"]

# declares the bearer scheme in the OpenAPI document; the token itself is checked by `current_actor`
bearer = HTTPBearer(auto_error=False, description="A gpufinops API token or an OIDC access token (JWT).")


@dataclass
class ApiContext:
    settings: Settings
    api: ApiSettings
    engine: Engine
    policy: Policy
    service: ChangeService
    warehouse: WarehouseReader
    auth: Authenticator
    metrics: Metrics
    team_of: Callable[[str | None, str | None], str | None]
    clock: Callable[[], datetime]
    # () -> the controller's Kubernetes client; built on first apply/rollback
    kube_factory: Callable[[], Any] | None = None
    # pre-serialised answers of the read endpoints, per warehouse version (api/response_cache.py)
    responses: ResponseCache = field(default_factory=ResponseCache)
    _kube: Any = field(default=None, repr=False)

    def kube(self) -> Any:
        if self._kube is None:
            if self.kube_factory is None:
                raise ApiError(503, "no Kubernetes target is configured for apply/rollback (api.kubeconfig)")
            self._kube = self.kube_factory()
        return self._kube

    def executor(self) -> Any:
        """The controller's executor; its Kubernetes client is connected on first use, so the policy
        gates (checked before any request) answer even without a reachable cluster."""
        from controller.executor import Executor

        return Executor(self.service, cast(Any, _LazyKube(self)))


class _LazyKube:
    def __init__(self, ctx: ApiContext) -> None:
        self._ctx = ctx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx.kube(), name)


# The two dependencies below are ``async`` so that FastAPI calls them on the event loop: a plain ``def``
# dependency costs a hop to the threadpool (and a wait for a free worker under load) on every request.
async def get_ctx(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.ctx
    return ctx


CtxDep = Annotated[ApiContext, Depends(get_ctx)]


async def current_actor(request: Request, ctx: CtxDep, _creds: Annotated[Any, Depends(bearer)]) -> Actor:
    """The caller. An embedded token is checked inline (a stat of the tokens file and one SHA-256 per
    entry); OIDC may fetch the identity provider's JWKS, which blocks, so it runs in the threadpool."""
    header = request.headers.get("authorization")
    if ctx.auth.oidc is not None:
        return await run_in_threadpool(ctx.auth.authenticate, header)
    return ctx.auth.authenticate(header)


ActorDep = Annotated[Actor, Depends(current_actor)]


def require_writer(actor: Actor) -> None:
    """Finance reads everything and changes nothing through the API."""
    if not actor.is_admin and not actor.member_teams:
        raise ApiError(403, f"{actor.name} may only read: changes need platform-admin, team-lead:<team> "
                            "or member:<team>")
