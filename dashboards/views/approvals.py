"""Approvals: the changes waiting for a decision that the viewer may see, one change's evidence, diff
and controller plan, approve / reject with a reason, and the change's audit history.

Layout only: ``ChangeService`` decides (visibility, approver roles, four-eyes, the policy) and its
refusals are shown as they come.
"""

from __future__ import annotations

import json

import streamlit as st

from changes.model import APPROVED, PROPOSED, STATUSES, TRANSITIONS, Actor, Change
from changes.service import ChangeService
from dashboards import change_control as cc
from dashboards.outcomes_panel import change_outcome_panel, outcomes_history
from dashboards.session import current
from dashboards.widgets import table
from gpufinops.errors import GpufinopsError, NotFound

ctx = current()
st.title("Approvals")
if not ctx.may_open("approvals"):
    st.error("The approvals queue needs the team-lead or platform-admin role.")
    st.stop()
actor = cc.actor_of(ctx.identity)
try:
    svc = cc.service(ctx)
except GpufinopsError as exc:
    st.error(f"Change control is unavailable: {exc}")
    st.stop()

cc.show_flash()

everything = st.toggle("Show decided changes too", key="approvals_all",
                       help="Off: only proposed and approved changes (what waits for a decision).")
listed = cc.queue(svc, actor, STATUSES if everything else cc.QUEUE_STATUSES)
if listed:
    table(cc.changes_frame(listed), "changes_queue")
else:
    st.info("Nothing waits for a decision." if not everything else "No changes you may see yet.")

# the change to show: ?change=<id> (a shared link) or the first listed; the service decides whether the
# viewer may see it, so a hand-edited id of another team's change is "not found", like a wrong one
ids = [c.id for c in listed]
requested = st.query_params.get("change")
extra: Change | None = None
if requested and requested not in ids:
    try:
        extra = svc.get(requested, actor=actor)
    except NotFound:
        st.error(f"Change `{requested}` not found.")
        st.query_params.pop("change", None)
        requested = None
    else:
        ids.insert(0, extra.id)
outcomes_history(ctx.warehouse, ctx.scope)  # the history of applied changes, whatever waits
if not ids:
    st.stop()
chosen_id = st.selectbox("Change", ids, index=ids.index(requested) if requested in ids else 0, key="approvals_pick")
st.query_params["change"] = chosen_id
change = next((c for c in listed if c.id == chosen_id), None) or extra or svc.get(chosen_id, actor=actor)


def _decide(service: ChangeService, who: Actor, change_id: str, decision: str) -> None:
    reason = st.session_state.get(f"approvals_reason_{change_id}", "")
    if decision == "approve":
        cc.run_action("Approve", lambda: service.approve(change_id, actor=who, reason=reason))
    else:
        cc.run_action("Reject", lambda: service.reject(change_id, actor=who, reason=reason))


st.subheader(f"{change.kind}: {change.target_kind}/{change.target_name}")
k = st.columns(4)
k[0].metric("Status", change.status)
k[1].metric("Approvals", f"{len(change.approvers)} of {change.approvals_required}")
k[2].metric("Team", change.team or "(platform)")
k[3].metric("Requested by", change.requested_by)
st.markdown(
    f"Cluster `{change.cluster}`, namespace `{change.namespace or '—'}` · ticket `{change.ticket or '—'}` · "
    f"created {change.created_at:%Y-%m-%d %H:%M} UTC · version {change.version}"
)
if change.reason:
    st.markdown(f"**Reason:** {change.reason}")
st.caption("May approve: " + ", ".join(f"`{r}`" for r in svc.approver_roles(change))
           + " — never the requester (four-eyes).")
if change.error:
    st.error(f"Apply error: {change.error}")

if change.status in (PROPOSED, APPROVED):
    st.text_input("Reason for your decision", key=f"approvals_reason_{change.id}",
                  placeholder="why approve / reject (kept in the audit log)")
    b = st.columns([1, 1, 6])
    if APPROVED in TRANSITIONS[change.status]:
        b[0].button("Approve", key="approvals_approve", type="primary", on_click=_decide,
                    args=(svc, actor, change.id, "approve"))
    b[1].button("Reject", key="approvals_reject", on_click=_decide, args=(svc, actor, change.id, "reject"))

st.subheader("Current vs proposed")
table(cc.diff_frame(change), f"change_{change.id}_diff",
      column_config={"changed": st.column_config.CheckboxColumn("changed")})
c = st.columns(2)
with c[0]:
    st.caption("current")
    st.json(change.current, expanded=True)
with c[1]:
    st.caption("proposed")
    st.json(change.proposed, expanded=True)

st.subheader("Evidence")
st.caption(f"as of {change.evidence_at:%Y-%m-%d %H:%M} UTC" if change.evidence_at else "no evidence timestamp")
st.json(change.evidence or {}, expanded=True)

st.subheader("Controller plan")
text, source = cc.plan_text(change)
if text:
    st.code(text, language=None)
st.caption(source.capitalize() + ".")

if change.applied_at is not None:
    change_outcome_panel(ctx.warehouse, ctx.scope, change.id)

st.subheader("History")
entries = svc.audit(actor=actor, change_id=change.id)
table(cc.history_frame(entries), f"change_{change.id}_history")
if change.approvals:
    st.caption("Decisions: " + "; ".join(
        f"{a.actor} {a.decision}d at {a.at:%Y-%m-%d %H:%M}" + (f" ({json.dumps(a.reason)})" if a.reason else "")
        for a in change.approvals))
