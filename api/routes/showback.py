"""``GET /v1/showback``: chargeback lines by tenant, team or namespace over a range of days (scoped).

Admins and finance see every line, including the ``(unallocated)`` and ``(overhead)`` ones; a team
token sees its teams' lines only. ``from`` and ``to`` are inclusive days; the default is the last 30
days of data.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from api.deps import ActorDep, CtxDep
from api.errors import PROBLEM_RESPONSES
from gpufinops.errors import BadRequest

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["showback"], responses=PROBLEM_RESPONSES)
_MAX_DAYS = 400


@router.get("/showback", summary="Showback / chargeback lines (scoped to the caller's teams)")
def showback(
    ctx: CtxDep, actor: ActorDep,
    from_: Annotated[date | None, Query(alias="from", description="first day (inclusive), YYYY-MM-DD")] = None,
    to: Annotated[date | None, Query(description="last day (inclusive), YYYY-MM-DD")] = None,
    group_by: Annotated[Literal["tenant", "team", "namespace"], Query()] = "team",
) -> dict[str, Any]:
    if to is None:
        last = ctx.warehouse.last_hour()
        to = last.date() if last is not None else date.today()
    if from_ is None:
        from_ = to - timedelta(days=29)
    if from_ > to:
        raise BadRequest(f"from {from_} is after to {to}")
    if (to - from_).days + 1 > _MAX_DAYS:
        raise BadRequest(f"from {from_} to {to} spans more than {_MAX_DAYS} days")
    start = datetime.combine(from_, time())
    end = datetime.combine(to + timedelta(days=1), time())
    teams = None if (actor.is_admin or actor.is_finance) else sorted(actor.member_teams)
    lines = ctx.warehouse.showback(start, end, group_by, teams)
    return {
        "from": from_.isoformat(), "to": to.isoformat(), "group_by": group_by,
        "total_chargeback_usd": round(sum(line["chargeback_usd"] for line in lines), 2),
        "lines": lines,
    }
