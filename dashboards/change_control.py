"""The dashboards' door to change control: the viewer as a ``changes.Actor``, one cached
``ChangeService`` per app DB, and the small read helpers the Approvals page and the team page share.

Who may do what is decided by ``ChangeService`` and the change policy, never here: the pages call it and
show its refusals (four-eyes, wrong role, stale version) as they come.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import make_url
from sqlalchemy.exc import SQLAlchemyError

from changes.model import APPROVED, FINANCE, PLATFORM_ADMIN, PROPOSED, Actor, AuditEntry, Change
from changes.policy import Policy
from changes.service import ChangeService
from changes.teams import warehouse_team_resolver
from dashboards.identity import Identity
from dashboards.session import ViewContext
from gpufinops.appdb import open_app_db
from gpufinops.errors import ConfigError, GpufinopsError
from gpufinops.views.names import TEAM_LEAD, team_role

__all__ = [
    "QUEUE_STATUSES",
    "actor_of",
    "service",
    "queue",
    "changes_frame",
    "diff_frame",
    "plan_text",
    "history_frame",
    "run_action",
    "show_flash",
]

# what waits for a decision: proposed (approve / reject) and approved (reject before it is applied)
QUEUE_STATUSES = (PROPOSED, APPROVED)
SERVICE_TTL_S = 300  # the team resolver reads the warehouse once; a rebuilt one is seen after this


def actor_of(identity: Identity) -> Actor:
    """The viewer as a change-control actor: the same role names (platform-admin, finance), and team lead
    of X -> team-lead:X. The name is the signed-in user (demo: ``demo-<role>``)."""
    roles: set[str] = set(identity.roles & {PLATFORM_ADMIN, FINANCE})
    if identity.has(TEAM_LEAD):
        roles.update(team_role(TEAM_LEAD, team) for team in identity.lead_of)
    return Actor(name=identity.user or "anonymous", roles=frozenset(roles))


def _dispose(svc: ChangeService) -> None:
    svc.engine.dispose()


@st.cache_resource(ttl=SERVICE_TTL_S, on_release=_dispose, show_spinner=False)
def _service(app_db_url: str, policy_path: str | None, warehouse_path: str) -> ChangeService:
    policy = Policy.load(Path(policy_path) if policy_path else None)
    return ChangeService(open_app_db(app_db_url), policy, team_of=warehouse_team_resolver(warehouse_path))


def service(ctx: ViewContext) -> ChangeService:
    """The change service on the viewer's app DB (migrated on first use), with the configured policy.
    Raises ConfigError (naming the DB, without its password) when the app DB cannot be opened."""
    policy = ctx.settings.change_policy
    url = ctx.settings.effective_app_db_url
    try:
        return _service(url, str(policy) if policy else None, ctx.warehouse.path)
    except SQLAlchemyError as exc:
        shown = make_url(url).render_as_string(hide_password=True)
        raise ConfigError(f"app DB {shown} cannot be opened ({type(exc).__name__}: {exc}); "
                          "check app_db_url (GPUFINOPS_APP_DB_URL)") from exc


def queue(svc: ChangeService, actor: Actor, statuses: tuple[str, ...] = QUEUE_STATUSES,
          team: str | None = None) -> list[Change]:
    """The changes in ``statuses`` the actor may see (newest first), optionally of one team only."""
    found = [c for status in statuses for c in svc.list(actor=actor, status=status, limit=500)]
    if team is not None:
        found = [c for c in found if c.team == team]
    return sorted(found, key=lambda c: (c.created_at, c.id), reverse=True)


def changes_frame(changes: list[Change]) -> pd.DataFrame:
    """One row per change, for the queue table."""
    return pd.DataFrame(
        [{
            "id": c.id, "status": c.status, "kind": c.kind, "cluster": c.cluster, "namespace": c.namespace or "—",
            "target": f"{c.target_kind}/{c.target_name}", "team": c.team or "(platform)",
            "requested_by": c.requested_by, "ticket": c.ticket or "",
            "approvals": f"{len(c.approvers)}/{c.approvals_required}", "created_at": c.created_at,
        } for c in changes],
        columns=["id", "status", "kind", "cluster", "namespace", "target", "team", "requested_by", "ticket",
                 "approvals", "created_at"],
    )


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix or "(value)": value}


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def diff_frame(change: Change) -> pd.DataFrame:
    """Current vs proposed, one row per (flattened) field, changed fields first."""
    cur, new = _flatten(change.current), _flatten(change.proposed)
    rows = [{"field": key, "current": _cell(cur.get(key)), "proposed": _cell(new.get(key)),
             "changed": cur.get(key) != new.get(key)} for key in dict.fromkeys([*cur, *new])]
    frame = pd.DataFrame(rows, columns=["field", "current", "proposed", "changed"])
    return frame.sort_values("changed", ascending=False, kind="stable").reset_index(drop=True)


def plan_text(change: Change) -> tuple[str | None, str]:
    """(the controller's plan as printed by ``--dry-run``, or None, and where it comes from / why none).

    A change being applied carries the plan the controller recorded; before that the planner is run
    without the live objects, which is enough for the kinds that need no current spec."""
    try:
        from controller.planner import Op, format_plan, plan
    except ImportError:
        return None, "the controller is not installed here"
    if change.plan:
        try:
            ops = [Op.from_dict(op) for op in change.plan]
            return format_plan(ops), "recorded by the controller when it applied the change"
        except (TypeError, KeyError):
            return json.dumps(change.plan, indent=2, sort_keys=True), "recorded by the controller"
    try:
        return format_plan(plan(change, None)), "preview without the live object (the controller re-plans against it)"
    except GpufinopsError as exc:
        return None, f"no preview without the live object: {exc}"


def history_frame(entries: list[AuditEntry]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"seq": e.seq, "at": e.at, "actor": e.actor, "action": e.action,
          "from": e.from_status or "", "to": e.to_status or "", "reason": e.reason or ""} for e in entries],
        columns=["seq", "at", "actor", "action", "from", "to", "reason"],
    )


FLASH_KEY = "_gpufinops_change_flash"


def run_action(label: str, action: Callable[[], Change]) -> None:
    """Run a ChangeService call from a button callback; keep its outcome for the next render
    (``st.success`` with the new status, or ``st.error`` with the service's message)."""
    try:
        change = action()
    except GpufinopsError as exc:
        st.session_state[FLASH_KEY] = ("error", f"{label} refused: {exc}")
    else:
        st.session_state[FLASH_KEY] = ("success", f"{label}: change {change.id} is now **{change.status}**.")


def show_flash() -> None:
    """Show (once) what the last action did."""
    flash = st.session_state.pop(FLASH_KEY, None)
    if flash is None:
        return
    kind, text = flash
    (st.error if kind == "error" else st.success)(text)
