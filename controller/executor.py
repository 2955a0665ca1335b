"""Apply, verify and roll back an approved change through the change service and the Kubernetes API.

The apply sequence (docs/controller.md):
1. the change must be ``approved`` (else Conflict, before any request);
2. read the live objects (the target and its resourceVersion; for node actions the nodes, their pods
   and the PDBs) and plan (pure); a refusal (do-not-disrupt, advice-only) leaves the change approved;
3. ``begin_apply`` with the live resourceVersion: the service's gates (pause, window, blast radius,
   approval expiry, stale target) and approved -> applying;
4. store the plan and the prior spec (the values at every pointer the ops set);
5. a server-side dry-run (``dryRun=All``) of every op, before any real write; a rejection -> failed,
   nothing written;
6. the real requests in plan order; a failure -> the ops already applied are restored (JSON patches
   built from the prior spec, dry-run first) and the change is failed;
7. ``finish_apply`` (applied), then verify with GETs: verified, or restored and rolled back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.kube import KubeClient, KubeError, KubeNotFound, KubeUnavailable
from controller.planner import NODE_CHANGE_KINDS, Op, api_path, plan
from controller.verify import VerifyReport, capture_prior, check_op, restore_patch
from gpufinops.errors import Conflict, GpufinopsError

__all__ = ["ApplyOutcome", "Executor", "LiveState"]

log = logging.getLogger("gpufinops.controller")

_APPROVED, _APPLIED, _VERIFIED, _FAILED = "approved", "applied", "verified", "failed"
_KUBE_ERRORS = (KubeError, KubeUnavailable)


@dataclass(frozen=True)
class LiveState:
    """What the planner reads (``view``), every object by path, and the target's resourceVersion."""

    view: dict[str, Any]
    objects: dict[str, dict[str, Any]]
    resource_version: str | None


@dataclass(frozen=True)
class ApplyOutcome:
    """A preview: the ops and, when the server was asked, what its dry-run said about each."""

    ops: list[Op]
    server: list[str] | None


def _change_fields(change: Any) -> tuple[str, str, str | None, str, str]:
    return change.id, change.kind, change.namespace, change.target_kind, change.target_name


class Executor:
    def __init__(self, service: Any, kube: KubeClient):
        self.service = service
        self.kube = kube

    # -- reading the cluster ------------------------------------------------------------------------
    def read_live(self, change: Any) -> LiveState:
        cid, kind, ns, target_kind, name = _change_fields(change)
        objects: dict[str, dict[str, Any]] = {}
        if kind in NODE_CHANGE_KINDS:
            return self._read_nodes(change, objects)
        path = api_path(target_kind, ns, name)
        try:
            target = self.kube.get(path)
        except KubeNotFound as exc:
            raise KubeNotFound(f"change {cid}: its target {target_kind} {ns}/{name} does not exist in the "
                               f"cluster ({exc})", status=404) from exc
        objects[path] = target
        # "now": the time a Notebook's stop annotation carries (the planner stays free of clocks)
        view: dict[str, Any] = {"target": target, "now": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        if kind in ("set_autoscaling", "scale_to_zero_window") and target_kind in ("Deployment", "StatefulSet"):
            hpas = self.kube.list_all(f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers")
            for hpa in hpas:
                ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
                if ref.get("kind") == target_kind and ref.get("name") == name:
                    view["hpa"] = hpa
                    objects[api_path("HorizontalPodAutoscaler", ns, hpa["metadata"]["name"])] = hpa
                    break
        return LiveState(view, objects, (target.get("metadata") or {}).get("resourceVersion"))

    def _read_nodes(self, change: Any, objects: dict[str, dict[str, Any]]) -> LiveState:
        if change.kind == "set_mig_config":
            pool = self.kube.nodes() if change.target_kind == "NodePool" else \
                [n for n in [self.kube.get_or_none(api_path("Node", None, change.target_name))] if n]
            for n in pool:
                objects[api_path("Node", None, n["metadata"]["name"])] = n
            return LiveState({"nodes": pool}, objects, None)
        names = change.proposed.get("freed_nodes") if change.kind == "consolidate_nodes" \
            else change.proposed.get("nodes") or ([change.target_name] if change.target_kind == "Node" else [])
        nodes: list[dict[str, Any]] = []
        pods: list[dict[str, Any]] = []
        pdbs: list[dict[str, Any]] = []
        for name in names or []:
            node = self.kube.get_or_none(api_path("Node", None, str(name)))
            if node is None:
                continue
            nodes.append(node)
            objects[api_path("Node", None, str(name))] = node
            for pod in self.kube.pods_on_node(str(name)):
                pods.append(pod)
                objects[api_path("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])] = pod
        for ns in sorted({p["metadata"]["namespace"] for p in pods}):
            pdbs.extend(self.kube.pdbs(ns))
        return LiveState({"nodes": nodes, "pods": pods, "pdbs": pdbs}, objects, None)

    # -- requests -----------------------------------------------------------------------------------
    def _send(self, op: Op, *, dry_run: bool) -> dict[str, Any]:
        if op.verb == "evict":
            return self.kube.evict(str(op.namespace), op.name, dry_run=dry_run)
        if op.patch_type is None:
            raise KubeError(f"op {op.verb} {op.api_path} has no patch type")
        return self.kube.patch(op.api_path, op.body, op.patch_type, dry_run=dry_run)

    # -- public -------------------------------------------------------------------------------------
    def plan_ops(self, change_id: str, actor: Any) -> tuple[Any, list[Op]]:
        """Read the live objects and plan; no writes of any kind."""
        change = self.service.get(change_id, actor=actor)
        return change, plan(change, self.read_live(change).view)

    def preview(self, change_id: str, actor: Any) -> ApplyOutcome:
        """The ops and the server-side dry-run answer for each (no state change anywhere)."""
        _, ops = self.plan_ops(change_id, actor)
        results = []
        for i, op in enumerate(ops, 1):
            try:
                self._send(op, dry_run=True)
                results.append(f"{i}. accepted by the server-side dry-run")
            except _KUBE_ERRORS as exc:
                results.append(f"{i}. REJECTED by the server-side dry-run: {exc}")
        return ApplyOutcome(ops, results)

    def dry_run(self, change_id: str, actor: Any) -> list[Op]:
        """Plan and send every op as a server-side dry-run; raises if the server rejects one."""
        _, ops = self.plan_ops(change_id, actor)
        for op in ops:
            self._send(op, dry_run=True)
        return ops

    def apply(self, change_id: str, actor: Any) -> Any:
        change = self.service.get(change_id, actor=actor)
        if change.status != _APPROVED:
            raise Conflict(f"change {change_id} is {change.status}; only an approved change can be applied")
        live = self.read_live(change)
        ops = plan(change, live.view)  # PlanRefused / PlanError: nothing changed, the change stays approved
        self.service.begin_apply(change_id, actor=actor, current_resource_version=live.resource_version)
        prior = capture_prior(ops, live.objects)
        self.service.record_plan(change_id, [op.to_dict() for op in ops], prior, actor=actor)
        for i, op in enumerate(ops):
            try:
                self._send(op, dry_run=True)
            except _KUBE_ERRORS as exc:
                return self.service.finish_apply(
                    change_id, actor=actor, ok=False,
                    result={"phase": "dry_run", "failed_op": i, "applied_ops": [], "rolled_back_ops": []},
                    error=f"server-side dry-run rejected op {i + 1}/{len(ops)} ({op.description}): {exc}; "
                          "nothing was changed")
        applied: list[int] = []
        results: dict[str, Any] = {}
        for i, op in enumerate(ops):
            try:
                resp = self._send(op, dry_run=False)
            except _KUBE_ERRORS as exc:
                undo = [j for j in applied if ops[j].reversible]
                restored, restore_error = self._restore_quietly(ops, undo, prior)
                error = f"op {i + 1}/{len(ops)} ({op.description}) failed: {exc}"
                if restore_error:
                    error += f"; restoring the {len(undo)} applied op(s) ALSO failed: {restore_error}"
                elif undo:
                    error += f"; the {len(undo)} applied op(s) were rolled back"
                not_reversible = [j for j in applied if not ops[j].reversible]
                if not_reversible:
                    error += f"; {len(not_reversible)} eviction(s) cannot be undone"
                return self.service.finish_apply(
                    change_id, actor=actor, ok=False,
                    result={"phase": "apply", "failed_op": i, "applied_ops": applied,
                            "rolled_back_ops": undo if not restore_error else [], "restored": restored},
                    error=error)
            applied.append(i)
            rv = (resp.get("metadata") or {}).get("resourceVersion")
            if rv:
                results[op.object_path] = rv
        self.service.finish_apply(change_id, actor=actor, ok=True,
                                  result={"phase": "applied", "applied_ops": applied, "rolled_back_ops": [],
                                          "resource_versions": results})
        return self._verify_or_restore(change_id, actor, ops, prior)

    def verify(self, change_id: str, actor: Any) -> tuple[Any, VerifyReport]:
        """Check an applied change against the cluster; verified when it holds (no rollback here)."""
        change = self.service.get(change_id, actor=actor)
        if change.status not in (_APPLIED, _VERIFIED):
            raise Conflict(f"change {change_id} is {change.status}; only an applied change can be verified")
        ops = [Op.from_dict(d) for d in change.plan or []]
        report = self.check(ops, change.prior_spec or {})
        if report.ok and change.status == _APPLIED:
            change = self.service.mark_verified(change_id, actor=actor, details=report.to_dict())
        return change, report

    def rollback(self, change_id: str, actor: Any, reason: str) -> Any:
        change = self.service.get(change_id, actor=actor)
        if change.status not in (_APPLIED, _VERIFIED, _FAILED):
            raise Conflict(f"change {change_id} is {change.status}; only an applied, verified or failed change "
                           "can be rolled back")
        ops = [Op.from_dict(d) for d in change.plan or []]
        result = change.result or {}
        if change.status == _FAILED:
            done = set(result.get("rolled_back_ops") or [])
            idx = [i for i in result.get("applied_ops") or [] if i not in done and ops[i].reversible]
        else:
            idx = [i for i, op in enumerate(ops) if op.reversible]
        restored = self._restore(ops, idx, change.prior_spec or {})
        skipped = [ops[i].description for i in (result.get("applied_ops") or []) if not ops[i].reversible]
        return self.service.mark_rolled_back(change_id, actor=actor, reason=reason,
                                             details={"restored": restored, "ops": idx,
                                                      "not_reversible": skipped})

    # -- verification and restore ---------------------------------------------------------------------
    def check(self, ops: list[Op], prior: Mapping[str, Any]) -> VerifyReport:
        report = VerifyReport()
        cache: dict[str, dict[str, Any] | None] = {}
        for op in ops:
            path = op.object_path
            if path not in cache:
                cache[path] = self.kube.get_or_none(path)
            problems = check_op(op, cache[path], (prior.get("pods") or {}).get(path))
            report.checked += 1
            report.problems.extend(problems)
        report.ok = not report.problems
        return report

    def _verify_or_restore(self, change_id: str, actor: Any, ops: list[Op], prior: Mapping[str, Any]) -> Any:
        try:
            report = self.check(ops, prior)
        except _KUBE_ERRORS as exc:
            report = VerifyReport(ok=False, problems=[f"cannot read the objects back: {exc}"])
        if report.ok:
            return self.service.mark_verified(change_id, actor=actor, details=report.to_dict())
        log.warning("change %s did not verify: %s; rolling back", change_id, "; ".join(report.problems))
        undo = [i for i, op in enumerate(ops) if op.reversible]
        restored, error = self._restore_quietly(ops, undo, prior)
        if error:
            return self.service.mark_failed(
                change_id, actor=actor, error="verification failed (" + "; ".join(report.problems)
                + f") and restoring the prior spec failed too: {error}", details={"verify": report.to_dict()})
        return self.service.mark_rolled_back(
            change_id, actor=actor, reason="verification failed: " + "; ".join(report.problems),
            details={"verify": report.to_dict(), "restored": restored})

    def _restore_quietly(self, ops: list[Op], idx: list[int], prior: Mapping[str, Any]) -> tuple[list[str], str | None]:
        try:
            return self._restore(ops, idx, prior), None
        except (GpufinopsError, KeyError) as exc:
            log.error("restoring the prior spec failed: %s", exc)
            return [], str(exc)

    def _restore(self, ops: list[Op], idx: list[int], prior: Mapping[str, Any]) -> list[str]:
        """Put back the prior values of the objects the given ops changed: dry-run every patch, then send."""
        paths = list(dict.fromkeys(ops[i].object_path for i in idx if ops[i].reversible))
        entries = prior.get("objects") or {}
        patches: list[tuple[str, list[dict[str, Any]]]] = []
        for path in paths:
            if path not in entries:
                raise KeyError(f"the prior spec has no record of {path}; cannot restore it")
            current = self.kube.get(path)
            patch = restore_patch(entries[path], current)
            if patch:
                patches.append((path, patch))
        for path, patch in patches:
            self.kube.patch(path, patch, "json", dry_run=True)
        for path, patch in patches:
            self.kube.patch(path, patch, "json", dry_run=False)
        return [p for p, _ in patches]
