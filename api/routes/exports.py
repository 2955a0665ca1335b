"""``GET /v1/exports/focus``: the FOCUS 1.3 allocation export of a range of charge days (finance only).

The rows come from the ``fct_focus_allocation_daily`` mart through :mod:`exports.focus`, the same
code as ``gpufinops export focus``; a range with no charges is a 400 that says so.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response

from api.deps import ActorDep, CtxDep
from api.errors import PROBLEM_RESPONSES
from gpufinops.errors import BadRequest, Forbidden, InputError

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["exports"], responses=PROBLEM_RESPONSES)
_MAX_DAYS = 400
_MEDIA = {"csv": "text/csv", "parquet": "application/vnd.apache.parquet"}


@router.get("/exports/focus", summary="FOCUS 1.3 allocation export (finance and admins)",
            response_class=Response,
            responses={200: {"content": {"text/csv": {}, "application/vnd.apache.parquet": {}},
                             "description": "the FOCUS rows as a file"}})
def focus_export(
    ctx: CtxDep, actor: ActorDep,
    start: Annotated[date, Query(description="first charge day (inclusive), YYYY-MM-DD")],
    end: Annotated[date, Query(description="last charge day (inclusive), YYYY-MM-DD")],
    format: Annotated[Literal["csv", "parquet"], Query()] = "csv",  # noqa: A002 - the query name
) -> Response:
    from exports.focus import export_bytes

    if not (actor.is_admin or actor.is_finance):
        raise Forbidden("the FOCUS export holds every team's cost: finance or admin only")
    if start > end:
        raise BadRequest(f"start {start} is after end {end}")
    if (end - start).days + 1 > _MAX_DAYS:
        raise BadRequest(f"start {start} to end {end} spans more than {_MAX_DAYS} days")
    try:
        with ctx.warehouse.connection() as con:
            data = export_bytes(con, start, end, format)
    except InputError as exc:
        raise BadRequest(str(exc)) from None
    name = f"focus-allocation-{start}-{end}.{format}"
    return Response(data, media_type=_MEDIA[format],
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})
