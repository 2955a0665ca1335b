"""Land the app DB's applied changes in the lake (``applied_changes``), for ``fct_change_outcomes``.

The warehouse is rebuilt from the lake only, so the changes that were applied reach it the way every
other input does: as a landing table, through the lake writer (atomic, gated, recorded). One row per
change that was ever applied (``applied_at`` set): its target, status, when it was applied, verified
and (rolled back or failed after the apply) ended, and the recommendation's estimate of its monthly
saving, as the change recorded it when it was proposed (``evidence.est_monthly_savings_usd``), else
the recommendation's current row.

Every export writes the whole set again, one run per cluster over one fixed window, so a re-run
replaces exactly what the last one wrote (a later rollback or verification lands; nothing is counted
twice). An applied change is never deleted from the app DB, so no cluster's rows can go missing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from gpufinops.appdb import as_utc
from gpufinops.appdb.schema import audit_log, changes, recommendations

__all__ = ["EXPORT_WINDOW", "SOURCE", "ExportResult", "applied_change_rows", "export_applied_changes"]

SOURCE = "app-db"
TABLE = "applied_changes"
# One window for every export: a re-run is the same (source, cluster, window) slice and replaces it.
EXPORT_WINDOW = (datetime(1970, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC))
_ENDS = ("rolled_back", "failed")  # audit actions after which an applied change is no longer in effect


@dataclass(frozen=True)
class ExportResult:
    rows: dict[str, int]  # cluster -> changes landed
    runs: dict[str, str]  # cluster -> lake run id


def _estimate(evidence: Any, rec_estimate: Any) -> float | None:
    frozen = (evidence or {}).get("est_monthly_savings_usd") if isinstance(evidence, dict) else None
    value = frozen if frozen is not None else rec_estimate
    return None if value is None else float(value)


def applied_change_rows(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Per cluster, the landing rows of every change that was applied (oldest first)."""
    q = (select(changes, recommendations.c.est_monthly_savings_usd.label("rec_estimate"))
         .select_from(changes.outerjoin(recommendations, recommendations.c.id == changes.c.recommendation_id))
         .where(changes.c.applied_at.is_not(None))
         .order_by(changes.c.applied_at, changes.c.id))
    ends = (select(audit_log.c.change_id, audit_log.c.at)
            .where(audit_log.c.action.in_(_ENDS), audit_log.c.change_id.is_not(None))
            .order_by(audit_log.c.seq))
    with engine.connect() as conn:
        found = conn.execute(q).mappings().all()
        ended: dict[str, datetime | None] = {}
        for row in conn.execute(ends).mappings():
            ended.setdefault(row["change_id"], as_utc(row["at"]))  # the first end after the apply
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in found:
        applied = as_utc(r["applied_at"])
        end = ended.get(r["id"])
        out[r["cluster"]].append({
            "applied_at": applied, "change_id": r["id"], "kind": r["kind"], "namespace": r["namespace"],
            "target_kind": r["target_kind"], "target_name": r["target_name"], "team": r["team"],
            "recommendation_id": r["recommendation_id"], "status": r["status"],
            "verified_at": as_utc(r["verified_at"]),
            "ended_at": end if end is not None and applied is not None and end >= applied else None,
            "est_monthly_savings_usd": _estimate(r["evidence"], r["rec_estimate"]),
        })
    return dict(out)


def export_applied_changes(engine: Engine, lake_dir: Path, *, quality: Any = None) -> ExportResult:
    """Write every applied change to the lake, one run per cluster (see the module doc)."""
    from ingest.lake import LakeWriter

    writer = LakeWriter(lake_dir, quality=quality)
    rows, runs = {}, {}
    for cluster, batch in sorted(applied_change_rows(engine).items()):
        with writer.run(SOURCE, cluster, *EXPORT_WINDOW) as run:
            rows[cluster] = run.add(TABLE, batch, where=f"app DB changes of cluster {cluster}")
        runs[cluster] = run.run_id
    return ExportResult(rows=rows, runs=runs)
