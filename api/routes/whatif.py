"""``POST /v1/clusters/{cluster}/whatif``: a priced placement what-if for one cluster (platform-admin).

The simulator (``gpufinops simulate``) runs on the cluster's nodes and the pod shapes of the
window, read from the marts; the result is stored under the home (the latest per cluster) and
returned. ``GET`` returns the latest stored result.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.concurrency import run_in_threadpool

from api.deps import ActorDep, CtxDep
from api.errors import PROBLEM_RESPONSES, ApiError
from gpufinops.errors import BadRequest, NotFound
from simulator.inputs import SimInputError
from simulator.whatif_service import WhatIfRequest, latest_whatif, run_whatif

__all__ = ["router"]

router = APIRouter(prefix="/v1/clusters", tags=["clusters"], responses=PROBLEM_RESPONSES)


def _admin(actor: Any) -> None:
    if not actor.is_admin:
        raise ApiError(403, "what-if simulations need the platform-admin role")


@router.post("/{cluster}/whatif", summary="Simulate a placement what-if for a cluster and price it")
async def whatif(cluster: Annotated[str, Path(max_length=255)], ctx: CtxDep, actor: ActorDep,
                 body: WhatIfRequest | None = None) -> dict[str, Any]:
    _admin(actor)
    if cluster not in ctx.warehouse.clusters():
        raise NotFound(f"cluster {cluster} is not in the warehouse")
    req = body or WhatIfRequest()
    settings = ctx.settings
    try:
        return await run_in_threadpool(run_whatif, settings.home, settings.warehouse_path, cluster, req)
    except (ValueError, SimInputError) as exc:
        raise BadRequest(str(exc)) from exc


@router.get("/{cluster}/whatif", summary="The latest stored what-if of a cluster")
def latest(cluster: Annotated[str, Path(max_length=255)], ctx: CtxDep, actor: ActorDep) -> dict[str, Any]:
    _admin(actor)
    found = latest_whatif(ctx.settings.home, cluster)
    if found is None:
        raise NotFound(f"cluster {cluster} has no stored what-if; POST one first")
    return found
