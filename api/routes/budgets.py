"""``GET /v1/budgets/breaches``: the budgets exceeded on a day (scoped), and whether their notice went out.

A breach is a team budget (the budgets file of the ``dashboards:`` settings) or a registered workload's
``budget_usd_day`` exceeded by the trailing run rate or the month-end forecast of
``fct_budget_run_rate_daily`` (``gpufinops.views.budgets``). Admins and finance see every breach; a team
token sees its teams' only.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from api.deps import ActorDep, CtxDep
from api.errors import PROBLEM_RESPONSES
from gpufinops.appdb.schema import budget_notifications
from gpufinops.views.budgets import evaluate, load_budget_settings
from gpufinops.views.scope import Scope

__all__ = ["router"]

router = APIRouter(prefix="/v1/budgets", tags=["budgets"], responses=PROBLEM_RESPONSES)


@router.get("/breaches", summary="Budgets exceeded by their run rate or month-end forecast (scoped)")
def list_breaches(
    ctx: CtxDep, actor: ActorDep,
    day: Annotated[date | None, Query(description="the day to check, YYYY-MM-DD (default: the last day with data)")] = None,
) -> dict[str, Any]:
    scope = Scope.everything() if (actor.is_admin or actor.is_finance) else Scope.of_teams(actor.member_teams)
    with ctx.warehouse.connection() as con:
        cur = con.cursor()
        try:
            status, found = evaluate(cur, scope, load_budget_settings(ctx.settings), ctx.engine, day)
        finally:
            cur.close()
    ids = [b.id for b in found]
    sent: dict[str, list[dict[str, Any]]] = {}
    if ids:
        with ctx.engine.connect() as conn:
            for r in conn.execute(select(budget_notifications).where(budget_notifications.c.breach_id.in_(ids))).mappings():
                sent.setdefault(r["breach_id"], []).append(
                    {"audience": r["audience"], "channel": r["channel"], "status": r["status"],
                     "sent_at": r["sent_at"].isoformat() if r["sent_at"] else None})
    when = status["day"].dropna().max() if len(status) else day
    items = []
    for b in found:
        item = b.to_dict()
        item["value_usd"] = round(b.value_usd, 2)
        item["budget_usd"] = round(b.budget_usd, 2)
        item["month_to_date_usd"] = round(b.month_to_date_usd, 2)
        item["notifications"] = sorted(sent.get(b.id, []), key=lambda n: (n["audience"], n["channel"]))
        items.append(item)
    return {"day": None if when is None else str(when), "budgets_checked": len(status), "total": len(items),
            "items": items}
