"""``gpufinops changes plan|apply|rollback|verify``: the controller's commands under ``changes``.

The Kubernetes target of a change is the ``sources`` entry of kind ``k8s`` for the change's cluster
(its kubeconfig / context), else the default kubeconfig or the in-cluster service account;
``--kubeconfig`` / ``--context`` override both. ``plan`` and ``apply --dry-run`` change nothing: they
print the ops and what the server-side dry-run says about each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.commands.changes import AsOption, RoleOption, actor_from, service_of
from cli.context import console, err_console, handle_errors, settings_of

__all__ = ["register_into", "kube_target"]

KubeconfigOption = Annotated[Path | None, typer.Option(
    "--kubeconfig", help="Kubeconfig to use [default: the cluster's k8s source, else $KUBECONFIG / in-cluster].")]
ContextOption = Annotated[str | None, typer.Option("--context", help="Kubeconfig context.")]


def kube_target(settings: Any, cluster: str, kubeconfig: Path | None, context: str | None) -> tuple[Path | None, str | None]:
    """(kubeconfig, context) for ``cluster``: options first, then its ``sources`` entry of kind k8s."""
    if kubeconfig is not None:
        return kubeconfig, context
    for src in settings.sources:
        if src.kind == "k8s" and src.cluster == cluster:
            return src.kubeconfig, context or src.context
    return None, context


def _executor(ctx: typer.Context, change_id: str, actor: Any, kubeconfig: Path | None, context: str | None) -> Any:
    from controller.executor import Executor
    from controller.kube import client_from

    service = service_of(ctx)
    change = service.get(change_id, actor=actor)  # NotFound before any cluster is contacted
    path, ctx_name = kube_target(settings_of(ctx), change.cluster, kubeconfig, context)
    return Executor(service, client_from(path, ctx_name))


def _outcome(change: Any) -> None:
    console.print(f"change {change.id}: [bold]{change.status}[/]")
    if change.error:
        err_console.print(f"[bold red]error:[/] {change.error}", highlight=False, soft_wrap=True)
    if change.status in ("failed", "rolled_back"):
        raise typer.Exit(1)


def register_into(changes_app: typer.Typer) -> None:
    @changes_app.command("plan")
    @handle_errors
    def plan_cmd(
        ctx: typer.Context,
        change_id: Annotated[str, typer.Argument(help="Change id (chg_...).")],
        as_json: Annotated[bool, typer.Option("--json", help="Print the ops as JSON.")] = False,
        kubeconfig: KubeconfigOption = None,
        context: ContextOption = None,
        as_user: AsOption = None,
        role: RoleOption = None,
    ) -> None:
        """Print the Kubernetes ops of a change and the server-side dry-run answer (changes nothing)."""
        from controller.kube import KubeUnavailable
        from controller.planner import Op, format_plan
        from gpufinops.errors import ConfigError

        actor = actor_from(as_user, role)
        try:
            outcome = _executor(ctx, change_id, actor, kubeconfig, context).preview(change_id, actor)
        except (KubeUnavailable, ConfigError) as exc:
            stored = service_of(ctx).get(change_id, actor=actor).plan
            if not stored:
                raise
            err_console.print(f"cluster unreachable ({exc}); the plan stored when the change was applied:",
                              highlight=False, markup=False, soft_wrap=True)
            console.print(format_plan([Op.from_dict(d) for d in stored]), highlight=False, markup=False,
                          soft_wrap=True)
            return
        if as_json:
            print(json.dumps({"ops": [o.to_dict() for o in outcome.ops], "server_dry_run": outcome.server}, indent=2))
            return
        console.print(format_plan(outcome.ops), highlight=False, markup=False, soft_wrap=True)
        for line in outcome.server or []:
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        if outcome.server and any("REJECTED" in line for line in outcome.server):
            raise typer.Exit(1)

    @changes_app.command("apply")
    @handle_errors
    def apply_cmd(
        ctx: typer.Context,
        change_id: Annotated[str, typer.Argument(help="Change id (chg_...).")],
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Plan + server-side dry-run only; change nothing.")]
        = False,
        kubeconfig: KubeconfigOption = None,
        context: ContextOption = None,
        as_user: AsOption = None,
        role: RoleOption = None,
    ) -> None:
        """Apply an approved change: server-side dry-run of every op, the real requests, verify."""
        from controller.planner import format_plan

        actor = actor_from(as_user, role)
        ex = _executor(ctx, change_id, actor, kubeconfig, context)
        if dry_run:
            ops = ex.dry_run(change_id, actor)
            console.print(format_plan(ops), highlight=False, markup=False, soft_wrap=True)
            console.print(f"server-side dry-run accepted all {len(ops)} op(s); nothing was changed")
            return
        _outcome(ex.apply(change_id, actor))

    @changes_app.command("rollback")
    @handle_errors
    def rollback_cmd(
        ctx: typer.Context,
        change_id: Annotated[str, typer.Argument(help="Change id (chg_...).")],
        reason: Annotated[str, typer.Option("--reason", help="Why (goes to the audit log).")],
        kubeconfig: KubeconfigOption = None,
        context: ContextOption = None,
        as_user: AsOption = None,
        role: RoleOption = None,
    ) -> None:
        """Restore the prior spec of an applied / verified / failed change (evictions cannot be undone)."""
        actor = actor_from(as_user, role)
        change = _executor(ctx, change_id, actor, kubeconfig, context).rollback(change_id, actor, reason)
        console.print(f"change {change.id}: [bold]{change.status}[/]")
        skipped = ((change.result or {}).get("rollback") or {}).get("not_reversible") or []
        for what in skipped:
            console.print(f"not undone: {what}", highlight=False, markup=False)

    @changes_app.command("verify")
    @handle_errors
    def verify_cmd(
        ctx: typer.Context,
        change_id: Annotated[str, typer.Argument(help="Change id (chg_...).")],
        kubeconfig: KubeconfigOption = None,
        context: ContextOption = None,
        as_user: AsOption = None,
        role: RoleOption = None,
    ) -> None:
        """Check that the cluster holds what an applied change set (marks it verified)."""
        actor = actor_from(as_user, role)
        change, report = _executor(ctx, change_id, actor, kubeconfig, context).verify(change_id, actor)
        console.print(f"change {change.id}: [bold]{change.status}[/] ({report.checked} op(s) checked)")
        for problem in report.problems:
            err_console.print(f"drift: {problem}", highlight=False, markup=False, soft_wrap=True)
        if not report.ok:
            err_console.print(f"the cluster no longer holds change {change.id}; "
                              f"`gpufinops changes rollback {change.id} --reason ...` restores the prior spec")
            raise typer.Exit(1)
