"""``kubectl get nodes,pods,namespaces,replicasets,jobs -A -o json`` files to snapshots.

kubectl writes a ``List`` whose items carry their own ``kind``; a single-resource dump
(``kubectl get pods -A -o json``) is a ``List`` too, and a raw API response is a typed list
(``PodList``) whose items may lack ``kind``, so the list's kind names them. The snapshot time is
given (``--at``) or the file's modification time.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufinops.errors import InputError
from ingest.k8s.snapshot import Snapshot

__all__ = ["expand_dump_paths", "parse_dump", "read_dump"]

_GLOB_CHARS = set("*?[")


def expand_dump_paths(patterns: Iterable[str | Path]) -> list[Path]:
    """Files named or matched by ``patterns`` (shell globs allowed), in order, without repeats."""
    out: list[Path] = []
    for pattern in patterns:
        text = str(pattern)
        if _GLOB_CHARS & set(text):
            matches = sorted(glob.glob(os.path.expanduser(text)))
            if not matches:
                raise InputError(f"--from-dump {text!r}: no file matches")
            paths = [Path(m) for m in matches]
        else:
            paths = [Path(text).expanduser()]
        for p in paths:
            if not p.is_file():
                raise InputError(f"dump file {p} does not exist or is not a file")
            if p not in out:
                out.append(p)
    return out


def _decode(raw: bytes, source: str) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(
            f"{source}: not JSON ({exc}); write it with `kubectl get nodes,pods,namespaces,"
            "replicasets,jobs -A -o json`"
        ) from exc


def read_dump(path: Path, taken_at: datetime | None = None) -> Snapshot:
    """Parse one dump file; :class:`InputError` names the file and the item index and kind."""
    try:
        raw = path.read_bytes()
        mtime = path.stat().st_mtime
    except OSError as exc:
        raise InputError(f"dump file {path}: cannot read: {exc.strerror or exc}") from exc
    at = taken_at or datetime.fromtimestamp(mtime, tz=UTC)
    return parse_dump(raw, f"dump file {path}", at)


def parse_dump(raw: bytes, source: str, taken_at: datetime) -> Snapshot:
    """Parse dump bytes (a file, or ``kubectl ... -o json`` piped to stdin); ``source`` names it in errors."""
    doc = _decode(raw, source)
    snap = Snapshot(taken_at=taken_at, origin=source)
    if not isinstance(doc, dict):
        raise InputError(f"{source}: expected a JSON object (a kubectl List), got {type(doc).__name__}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{source}: the top-level object has no 'kind' (expected 'List')")
    if not kind.endswith("List"):
        _add_item(snap, None, doc, kind)  # a single object (kubectl get node n1 -o json)
        return snap
    items = doc.get("items")
    if not isinstance(items, list):
        raise InputError(f"{source}: {kind} has no 'items' array")
    default_kind = kind[: -len("List")] or None  # "PodList" -> "Pod"; "List" -> None
    for i, item in enumerate(items):
        _add_item(snap, i, item, default_kind)
    return snap


def _add_item(snap: Snapshot, index: int | None, item: Any, default_kind: str | None) -> None:
    source = snap.origin
    label = f"item {index}" if index is not None else "object"
    if not isinstance(item, dict):
        raise InputError(f"{source}: {label}: expected an object, got {type(item).__name__}")
    kind = item.get("kind") or default_kind
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{source}: {label}: has no 'kind'")
    meta = item.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise InputError(f"{source}: {label} (kind {kind}): has no metadata.name")
    if kind == "Pod" and not meta.get("namespace"):
        raise InputError(f"{source}: {label} (Pod {meta['name']}): has no metadata.namespace")
    snap.add(kind, item, label)
