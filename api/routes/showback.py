"""``GET /v1/showback``: chargeback lines by tenant, team or namespace over a range of days (scoped).

Admins and finance see every line, including the ``(unallocated)`` and ``(overhead)`` ones; a team
token sees its teams' lines only. ``from`` and ``to`` are inclusive days; the default is the last 30
days of data.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from api.deps import ActorDep, ApiContext, CtxDep
from api.errors import PROBLEM_RESPONSES
from api.response_cache import CachedBody, view_of
from api.routes._common import answer, json_body

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["showback"], responses=PROBLEM_RESPONSES)
_MAX_DAYS = 400


def _showback_body(ctx: ApiContext, key: tuple[Any, ...], route: Any = None) -> tuple[CachedBody, bool]:
    """The serialised answer (one warehouse snapshot) and whether it may be cached: not when the
    default last day came from the clock (a warehouse without hours)."""
    _, first, last, group_by, teams = key
    stamp, first, last, lines = ctx.warehouse.showback_view(first, last, group_by, teams, max_days=_MAX_DAYS)
    payload = {
        "from": first.isoformat(), "to": last.isoformat(), "group_by": group_by,
        "total_chargeback_usd": round(sum(line["chargeback_usd"] for line in lines), 2),
        "lines": lines,
    }
    cacheable = key[2] is not None or ctx.warehouse.last_hour() is not None
    return CachedBody(json_body(payload), stamp, route=route), cacheable


@router.get("/showback", summary="Showback / chargeback lines (scoped to the caller's teams)",
            response_model=dict[str, Any])
async def showback(
    request: Request, ctx: CtxDep, actor: ActorDep,
    from_: Annotated[date | None, Query(alias="from", description="first day (inclusive), YYYY-MM-DD")] = None,
    to: Annotated[date | None, Query(description="last day (inclusive), YYYY-MM-DD")] = None,
    group_by: Annotated[Literal["tenant", "team", "namespace"], Query()] = "team",
) -> Response:
    """Answered from the response cache while the warehouse version is the same (api/response_cache.py);
    a miss reads the warehouse in the threadpool."""
    teams = view_of(actor)
    key = ("showback", from_, to, group_by, teams)
    hit = await answer(ctx, key, lambda: _showback_body(ctx, key, request.scope.get("route")), request, actor)
    return Response(hit.body, media_type="application/json")
