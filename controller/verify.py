"""Prior specs, verification and the restore patch: all in terms of the JSON pointers an op sets.

``capture_prior`` records, per object an op changes, the value at every pointer the op sets (or the
shallowest ancestor that did not exist), plus the uid and node of every pod to evict.
``check_ops`` compares live objects with the ops' ``expect`` (quantities compared by value: the
API server canonicalises them). ``restore_patch`` builds the RFC 6902 patch that puts exactly those
fields back, guarded by ``test`` ops on container names so an index never points elsewhere. A parent
the change created (say ``metadata.annotations`` for a Notebook's stop annotation) is removed whole
only when it holds nothing else now; otherwise just the keys the change set go.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.planner import Op
from gpufinops.errors import InputError
from ingest.quantity import parse_quantity

__all__ = [
    "VerifyReport",
    "capture_prior",
    "check_op",
    "resolve",
    "restore_patch",
    "tokens",
]

_MISSING = object()


def tokens(ptr: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in ptr[1:].split("/")] if ptr else []


def _join(toks: list[str]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in toks)


def resolve(obj: Any, ptr: str) -> Any:
    """The value at ``ptr``, or ``_MISSING``."""
    cur = obj
    for t in tokens(ptr):
        if isinstance(cur, list):
            try:
                cur = cur[int(t)]
            except (ValueError, IndexError):
                return _MISSING
        elif isinstance(cur, Mapping):
            if t not in cur:
                return _MISSING
            cur = cur[t]
        else:
            return _MISSING
    return cur


def _shallowest_missing(obj: Any, ptr: str) -> str:
    toks = tokens(ptr)
    for i in range(1, len(toks) + 1):
        if resolve(obj, _join(toks[:i])) is _MISSING:
            return _join(toks[:i])
    return ptr


def _same(actual: Any, wanted: Any) -> bool:
    if actual == wanted:
        return True
    if isinstance(actual, str | int | float) and isinstance(wanted, str | int | float) \
            and not isinstance(actual, bool) and not isinstance(wanted, bool):
        try:
            return parse_quantity(actual) == parse_quantity(wanted)  # "1024Mi" == "1Gi"
        except (InputError, ValueError, TypeError):
            return False
    return False


def capture_prior(ops: list[Op], objects: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The prior spec: ``{"objects": {path: {kind, namespace, name, resource_version, values, absent}},
    "pods": {path: {uid, node}}}`` from the live objects (by object path) the ops change."""
    out: dict[str, Any] = {"objects": {}, "pods": {}}
    for op in ops:
        obj = objects.get(op.object_path)
        if obj is None:
            continue
        meta = obj.get("metadata") or {}
        if op.verb == "evict":
            out["pods"][op.object_path] = {"namespace": op.namespace, "name": op.name, "uid": meta.get("uid"),
                                           "node": (obj.get("spec") or {}).get("nodeName")}
            continue
        entry = out["objects"].setdefault(op.object_path, {
            "kind": op.kind, "namespace": op.namespace, "name": op.name,
            "resource_version": meta.get("resourceVersion"), "values": {}, "absent": [], "guards": {}, "set": []})
        for ptr in op.expect:
            if ptr not in entry["set"]:
                entry["set"].append(ptr)
            value = resolve(obj, ptr)
            if value is _MISSING:
                gone = _shallowest_missing(obj, ptr)
                if gone not in entry["absent"]:
                    entry["absent"].append(gone)
            else:
                entry["values"][ptr] = value
        entry["guards"].update(op.guards)
    return out


@dataclass
class VerifyReport:
    ok: bool = True
    checked: int = 0
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checked": self.checked, "problems": self.problems}


def check_op(op: Op, obj: Mapping[str, Any] | None, prior_pod: Mapping[str, Any] | None = None) -> list[str]:
    """Problems (empty = the op took effect) given the object as read now (None = 404)."""
    if op.verb == "evict":
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return []
        if prior_pod and (obj.get("metadata") or {}).get("uid") != prior_pod.get("uid"):
            return []  # a StatefulSet recreated the pod under the same name: the evicted one is gone
        return [f"pod {op.namespace}/{op.name} is still running on node {(obj.get('spec') or {}).get('nodeName')}"]
    if obj is None:
        return [f"{op.kind} {op.name}: not found after the change"]
    problems = []
    for ptr, wanted in op.expect.items():
        actual = resolve(obj, ptr)
        if wanted is None:
            if actual is not _MISSING:
                problems.append(f"{op.kind} {op.name}: {ptr} is {actual!r}, expected it removed")
        elif actual is _MISSING or not _same(actual, wanted):
            shown = "absent" if actual is _MISSING else repr(actual)
            problems.append(f"{op.kind} {op.name}: {ptr} is {shown}, expected {wanted!r}")
    for ptr, wanted in op.guards.items():
        if resolve(obj, ptr) != wanted:
            problems.append(f"{op.kind} {op.name}: {ptr} is no longer {wanted!r} (containers reordered?)")
    return problems


def _nested(toks: list[str], value: Any) -> Any:
    for t in reversed(toks):
        value = {t: value}
    return value


def _holds_only(value: Mapping[str, Any], leaves: list[list[str]]) -> bool:
    """True when ``value`` holds nothing but the given leaves (and the dicts leading to them)."""
    heads = {leaf[0] for leaf in leaves if leaf}
    for key, sub in value.items():
        if key not in heads:
            return False
        rest = [leaf[1:] for leaf in leaves if leaf and leaf[0] == key]
        if any(not r for r in rest):
            continue  # one of ours ends here
        if not isinstance(sub, Mapping) or not _holds_only(sub, rest):
            return False
    return True


def restore_patch(entry: Mapping[str, Any], current: Mapping[str, Any]) -> list[dict[str, Any]]:
    """RFC 6902 ops that put the prior values back into ``current`` and remove what did not exist."""
    ops: list[dict[str, Any]] = [{"op": "test", "path": p, "value": v} for p, v in sorted(entry["guards"].items())]
    for ptr, value in sorted(entry["values"].items()):
        if resolve(current, ptr) is not _MISSING:
            if resolve(current, ptr) != value:
                ops.append({"op": "replace", "path": ptr, "value": value})
            continue
        gone = _shallowest_missing(current, ptr)  # re-create missing parents along the way
        rest = tokens(ptr)[len(tokens(gone)):]
        ops.append({"op": "add", "path": gone, "value": _nested(rest, value)})
    absent = sorted(entry["absent"], key=lambda p: len(tokens(p)))
    removed: list[str] = []
    for ptr in absent:
        if any(ptr == r or ptr.startswith(r + "/") for r in removed):
            continue
        now = resolve(current, ptr)
        if now is _MISSING:
            continue
        ours = [p for p in entry.get("set") or [] if p.startswith(ptr + "/")]
        if ours and isinstance(now, Mapping) and not _holds_only(now, [tokens(p)[len(tokens(ptr)):] for p in ours]):
            for leaf in sorted(ours):  # something else lives there now: take back only what we set
                if resolve(current, leaf) is not _MISSING and not any(leaf.startswith(r + "/") for r in removed):
                    ops.append({"op": "remove", "path": leaf})
                    removed.append(leaf)
            continue
        ops.append({"op": "remove", "path": ptr})
        removed.append(ptr)
    return ops if any(o["op"] != "test" for o in ops) else []
