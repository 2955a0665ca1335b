"""``gpufinops changes ...``: propose, approve, reject, list and audit changes; pause/resume applies.

The CLI is the operator's tool: whoever runs it can reach the app DB, so it acts as ``--as USER``
(default ``$USER``, env ``GPUFINOPS_ACTOR``) with the roles given by ``--role`` (repeatable, env
``GPUFINOPS_ROLES`` space-separated; default ``platform-admin``). Policy gates still apply (four-eyes
compares the names: the requester cannot approve under the same name).

apply / plan / rollback / verify are added by ``cli.commands.changes_control`` when it is present.
"""

from __future__ import annotations

import getpass
import json
import os
from typing import Annotated, Any

import typer
from rich.table import Table

from changes.model import Actor, Change
from changes.service import ChangeService
from cli.context import console, err_console, handle_errors, settings_of

__all__ = ["register", "changes_app", "actor_from", "service_of", "AsOption", "RoleOption"]

changes_app = typer.Typer(
    name="changes",
    help="Changes: propose from recommendations, approve/reject, audit (the operator's tool).",
    no_args_is_help=True,
)

AsOption = Annotated[str | None, typer.Option("--as", envvar="GPUFINOPS_ACTOR",
                                              help="Act as this user [default: $USER].")]
RoleOption = Annotated[list[str] | None, typer.Option(
    "--role", envvar="GPUFINOPS_ROLES",
    help="Role of the actor (repeatable): platform-admin, finance, team-lead:TEAM, member:TEAM "
         "[default: platform-admin].")]


def actor_from(as_user: str | None, roles: list[str] | None) -> Actor:
    """The CLI's actor: ``--as`` (or $USER) with ``--role`` (default platform-admin)."""
    name = as_user or os.environ.get("USER") or getpass.getuser()
    flat = [r for item in roles or [] for r in item.split()]
    return Actor(name=name, roles=frozenset(flat or ["platform-admin"]))


def service_of(ctx: typer.Context) -> ChangeService:
    return ChangeService.from_settings(settings_of(ctx))


def _when(value: Any) -> str:
    return f"{value:%Y-%m-%d %H:%M}" if value is not None else "-"


def _brief(c: Change) -> str:
    p = c.proposed
    if "freed_nodes" in p:
        return f"free {len(p['freed_nodes'])} node(s)"
    parts = [f"{k}={v}" for k, v in p.items() if not isinstance(v, dict | list)]
    return ", ".join(parts)[:60]


def _print_change(c: Change) -> None:
    t = Table(title=f"change {c.id}", show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    for label, value in (
        ("status", f"{c.status} (version {c.version})"), ("kind", c.kind),
        ("target", f"{c.cluster}/{c.namespace or '-'} {c.target_kind}/{c.target_name}"),
        ("team", c.team or "platform"), ("requested by", c.requested_by), ("ticket", c.ticket or "-"),
        ("reason", c.reason or "-"), ("recommendation", c.recommendation_id or "-"),
        ("approvals", f"{len(c.approvers)}/{c.approvals_required}: "
                      + (", ".join(f"{a.actor} {a.decision} {_when(a.at)}" for a in c.approvals) or "none")),
        ("current", json.dumps(c.current, sort_keys=True)), ("proposed", json.dumps(c.proposed, sort_keys=True)),
        ("evidence at", _when(c.evidence_at)), ("created", _when(c.created_at)), ("updated", _when(c.updated_at)),
        ("applied", _when(c.applied_at)), ("verified", _when(c.verified_at)),
        ("plan", f"{len(c.plan)} op(s)" if c.plan else "-"), ("error", c.error or "-"),
    ):
        t.add_row(label, str(value))
    console.print(t)


@changes_app.command("list")
@handle_errors
def list_changes(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option("--status", help="Only this status.")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="Only this kind.")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster")] = None,
    namespace: Annotated[str | None, typer.Option("--namespace")] = None,
    limit: Annotated[int, typer.Option("--limit")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    as_user: AsOption = None,
    role: RoleOption = None,
) -> None:
    """List changes the actor may see, newest first."""
    rows = service_of(ctx).list(actor=actor_from(as_user, role), status=status, kind=kind, cluster=cluster,
                                namespace=namespace, limit=limit)
    if as_json:
        print(json.dumps([c.to_dict() for c in rows], indent=2))
        return
    t = Table(title=f"Changes ({len(rows)})")
    for col in ("id", "status", "kind", "cluster / namespace", "target", "team", "requested by", "approvals",
                "proposed", "updated"):
        t.add_column(col, overflow="fold")
    for c in rows:
        t.add_row(c.id, c.status, c.kind, f"{c.cluster} / {c.namespace or '-'}", f"{c.target_kind}/{c.target_name}",
                  c.team or "platform", c.requested_by, f"{len(c.approvers)}/{c.approvals_required}", _brief(c),
                  _when(c.updated_at))
    console.print(t)


@changes_app.command("candidates")
@handle_errors
def candidates(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Option("--kind", help="Only this recommendation kind.")] = None,
    namespace: Annotated[str | None, typer.Option("--namespace")] = None,
    limit: Annotated[int, typer.Option("--limit")] = 20,
) -> None:
    """Open recommendations that can become changes (`propose --from-rec ID`), largest saving first."""
    from recommender.store import RecommendationStore

    rows = RecommendationStore(settings_of(ctx).effective_app_db_url).list(kind=kind)
    rows = [r for r in rows if namespace is None or r["namespace"] == namespace][:limit]
    t = Table(title=f"Open recommendations ({len(rows)} shown)")
    for col in ("id", "kind", "cluster / namespace", "workload", "$/month", "confidence", "risk"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["id"], r["kind"], f"{r['cluster']} / {r['namespace'] or '-'}", r["workload"] or "-",
                  f"{r['est_monthly_savings_usd']:,.0f}", f"{r['confidence']:.2f}", r["risk"])
    console.print(t)


@changes_app.command("show")
@handle_errors
def show(
    ctx: typer.Context,
    change_id: Annotated[str, typer.Argument(help="Change id (chg_...).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    as_user: AsOption = None,
    role: RoleOption = None,
) -> None:
    """One change with its approvals."""
    c = service_of(ctx).get(change_id, actor=actor_from(as_user, role))
    if as_json:
        print(json.dumps(c.to_dict(), indent=2))
        return
    _print_change(c)


@changes_app.command("propose")
@handle_errors
def propose(
    ctx: typer.Context,
    from_rec: Annotated[str, typer.Option("--from-rec", help="Recommendation id to turn into a change.")],
    ticket: Annotated[str | None, typer.Option("--ticket", help="Ticket reference (policy ticket_pattern).")] = None,
    reason: Annotated[str | None, typer.Option("--reason")] = None,
    target_kind: Annotated[str | None, typer.Option(
        "--target-kind", help="Kubernetes kind of the target when the recommendation does not say.")] = None,
    as_user: AsOption = None,
    role: RoleOption = None,
) -> None:
    """Propose a change from a recommendation."""
    c = service_of(ctx).create_from_recommendation(from_rec, actor=actor_from(as_user, role), ticket=ticket,
                                                   reason=reason, target_kind=target_kind)
    console.print(f"proposed {c.id}: {c.kind} {c.target_kind}/{c.target_name} in {c.cluster}/{c.namespace or '-'}; "
                  f"needs {c.approvals_required} approval(s)")


@changes_app.command("propose-top")
@handle_errors
def propose_top(
    ctx: typer.Context,
    count: Annotated[int, typer.Option("--count", min=1, max=50, help="How many changes to propose.")] = 3,
    kind: Annotated[list[str] | None, typer.Option("--kind", help="Only these recommendation kinds (repeatable).")] = None,
    ticket: Annotated[str | None, typer.Option("--ticket", help="Ticket reference (policy ticket_pattern).")] = None,
    as_user: AsOption = None,
    role: RoleOption = None,
) -> None:
    """Propose changes from the open recommendations with the largest savings, one kind after another
    (the demo's approval queue). Re-runs propose nothing twice: each proposal's idempotency key is its
    recommendation's id."""
    from gpufinops.errors import GpufinopsError
    from recommender.store import RecommendationStore

    actor = actor_from(as_user, role)
    svc = service_of(ctx)
    rows = [r for r in RecommendationStore(settings_of(ctx).effective_app_db_url).list()
            if not kind or r["kind"] in kind]
    # round-robin over kinds, largest saving first within each: the queue shows several kinds of change
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_kind.setdefault(r["kind"], []).append(r)
    order = sorted(by_kind, key=lambda k: -by_kind[k][0]["est_monthly_savings_usd"])
    picked: list[dict[str, Any]] = []
    while len(picked) < count and any(by_kind[k] for k in order):
        for k in order:
            if by_kind[k] and len(picked) < count:
                picked.append(by_kind[k].pop(0))
    if not picked:
        err_console.print("no open recommendations to propose from; run `gpufinops recommend` first")
    for r in picked:
        try:
            c = svc.create_from_recommendation(r["id"], actor=actor, ticket=ticket, idempotency_key=f"propose-top:{r['id']}")
        except GpufinopsError as exc:
            err_console.print(f"[yellow]skipped[/] {r['id']} ({r['kind']}): {exc}", highlight=False)
            continue
        console.print(f"{c.id} {c.status}: {c.kind} {c.target_kind}/{c.target_name} in {c.cluster}/{c.namespace or '-'} "
                      f"(${r['est_monthly_savings_usd']:,.0f}/month)", highlight=False)


@changes_app.command("approve")
@handle_errors
def approve(
    ctx: typer.Context,
    change_id: Annotated[str, typer.Argument(help="Change id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (goes to the audit log).")],
    resource_version: Annotated[str | None, typer.Option(
        "--resource-version", help="The target's resourceVersion you reviewed.")] = None,
    as_user: AsOption = None,
    role: RoleOption = None,
) -> None:
    """Approve a proposed change (never your own)."""
    c = service_of(ctx).approve(change_id, actor=actor_from(as_user, role), reason=reason,
                                resource_version=resource_version)
    console.print(f"{c.id}: {c.status} ({len(c.approvers)}/{c.approvals_required} approvals)")


@changes_app.command("reject")
@handle_errors
def reject(
    ctx: typer.Context,
    change_id: Annotated[str, typer.Argument(help="Change id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (goes to the audit log).")],
    as_user: AsOption = None,
    role: RoleOption = None,
) -> None:
    """Reject a proposed or approved change."""
    c = service_of(ctx).reject(change_id, actor=actor_from(as_user, role), reason=reason)
    console.print(f"{c.id}: {c.status}")


@changes_app.command("audit")
@handle_errors
def audit(
    ctx: typer.Context,
    change_id: Annotated[str | None, typer.Argument(help="Only this change's entries.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="The newest N entries.")] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    as_user: AsOption = None,
    role: RoleOption = None,
) -> None:
    """The audit log (all, or one change's), oldest first."""
    entries = service_of(ctx).audit(actor=actor_from(as_user, role), change_id=change_id, limit=limit)
    if as_json:
        print(json.dumps([e.to_dict() for e in entries], indent=2))
        return
    t = Table(title="Audit log" + (f" of {change_id}" if change_id else ""))
    for col in ("seq", "at (UTC)", "actor", "action", "change", "from → to", "reason", "hash"):
        t.add_column(col, overflow="fold")
    for e in entries:
        t.add_row(str(e.seq), f"{e.at:%Y-%m-%d %H:%M:%S}", e.actor, e.action, e.change_id or "-",
                  f"{e.from_status or '-'} → {e.to_status or '-'}", e.reason or "", e.hash[:12])
    console.print(t)


@changes_app.command("verify-audit")
@handle_errors
def verify_audit(ctx: typer.Context) -> None:
    """Recompute the audit hash chain; exit 1 naming the first bad seq. Prints the head hash to anchor."""
    from changes.audit import verify
    from gpufinops.appdb import open_app_db

    report = verify(open_app_db(settings_of(ctx).effective_app_db_url))
    if report.ok:
        console.print(f"audit log OK: {report.rows} rows; head seq {report.head_seq} hash {report.head_hash}")
        console.print("anchor this head hash outside the app DB to detect a rewrite of the whole chain")
        return
    err_console.print(f"[bold red]audit log BROKEN[/] at seq {report.first_bad_seq} ({report.rows} rows):",
                      highlight=False)
    for p in report.problems:
        err_console.print(f"  {p}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


@changes_app.command("pause")
@handle_errors
def pause(
    ctx: typer.Context,
    reason: Annotated[str, typer.Option("--reason", help="Why (goes to the audit log).")],
    as_user: AsOption = None,
    role: RoleOption = None,
) -> None:
    """Pause every apply (platform-admin)."""
    service_of(ctx).set_paused(True, actor=actor_from(as_user, role), reason=reason)
    console.print("changes paused: every apply is refused until `gpufinops changes resume`")


@changes_app.command("resume")
@handle_errors
def resume(
    ctx: typer.Context,
    reason: Annotated[str, typer.Option("--reason", help="Why (goes to the audit log).")],
    as_user: AsOption = None,
    role: RoleOption = None,
) -> None:
    """Resume applies after a pause (platform-admin)."""
    svc = service_of(ctx)
    svc.set_paused(False, actor=actor_from(as_user, role), reason=reason)
    if svc.policy.paused:
        console.print("resumed in the app DB, but the policy file still says paused: true")
    else:
        console.print("changes resumed")


def _register_controller(app: typer.Typer) -> None:
    """apply / plan / rollback / verify live with the controller (cli/commands/changes_control.py)."""
    try:
        from cli.commands import changes_control  # type: ignore[attr-defined,unused-ignore]
    except ModuleNotFoundError:
        return
    changes_control.register_into(app)


def register(app: typer.Typer) -> None:
    app.add_typer(changes_app, name="changes")


_register_controller(changes_app)
