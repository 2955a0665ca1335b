"""One snapshot of a cluster (objects + when) to the three landing tables, and into the lake.

A snapshot lands as its own lake run over ``[t, t + 1 s)`` with source ``k8s``, where ``t`` is
the snapshot time truncated to the second (the lake names files by second, so two snapshots of
one cluster must not share a second). The warehouse derives each snapshot's coverage from the
next snapshot of the same cluster (DESIGN §3 and §7); nothing here extrapolates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from gpufinops.errors import InputError
from ingest.k8s.mapping import OwnerIndex, describe, namespace_row, node_row, pod_row
from ingest.lake import LakeWriter, RunRecord
from ingest.schema import TABLES

__all__ = ["SOURCE", "SNAPSHOT_WINDOW", "Snapshot", "land_snapshot", "snapshot_start", "snapshot_tables"]

log = logging.getLogger("gpufinops.ingest.k8s")

SOURCE = "k8s"
SNAPSHOT_WINDOW = timedelta(seconds=1)
# Object kinds that become rows; everything else in a dump or list only helps resolve owners.
_ROW_KINDS = ("Node", "Pod", "Namespace")


@dataclass
class Snapshot:
    """Objects seen at ``taken_at``; each object comes with a label that says where it came from
    (``item 12`` of a dump, ``pods page 3``), used in error messages."""

    taken_at: datetime
    origin: str  # the dump file, or "live <server>"
    nodes: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    pods: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    namespaces: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    owners: OwnerIndex = field(default_factory=OwnerIndex)

    def add(self, kind: str, obj: Mapping[str, Any], label: str) -> None:
        """File an object under its kind; every namespaced object also joins the owner index."""
        if kind == "Node":
            self.nodes.append((label, obj))
        elif kind == "Pod":
            self.pods.append((label, obj))
        elif kind == "Namespace":
            self.namespaces.append((label, obj))
        else:
            self.owners.add(obj, kind)

    @property
    def counts(self) -> dict[str, int]:
        return {"nodes": len(self.nodes), "pods": len(self.pods), "namespaces": len(self.namespaces)}


def snapshot_start(taken_at: datetime) -> datetime:
    ts = taken_at.replace(tzinfo=UTC) if taken_at.tzinfo is None else taken_at.astimezone(UTC)
    return ts.replace(microsecond=0)


def _rows(snap: Snapshot, kind: str, ts: datetime) -> list[dict[str, Any]]:
    items = {"Node": snap.nodes, "Pod": snap.pods, "Namespace": snap.namespaces}[kind]
    out = []
    for label, obj in items:
        try:
            if kind == "Pod":
                out.append(pod_row(obj, ts, snap.owners))
            elif kind == "Node":
                out.append(node_row(obj, ts))
            else:
                out.append(namespace_row(obj, ts))
        except InputError as exc:
            raise InputError(f"{snap.origin}: {label} ({describe(obj, kind)}): {exc}") from exc
        except (AttributeError, TypeError, ValueError, KeyError, OverflowError) as exc:
            # A field of the wrong JSON type (e.g. `spec: true`): the object is not a Kubernetes one.
            raise InputError(f"{snap.origin}: {label} ({_safe_describe(obj, kind)}): malformed {kind} object, a field has "
                             f"the wrong type ({type(exc).__name__}: {exc}); check it with `kubectl get -o json`") from exc
    return out


def _safe_describe(obj: Mapping[str, Any], kind: str) -> str:
    try:
        return describe(obj, kind)
    except Exception:  # noqa: BLE001 - only a label for a message about a malformed object
        return kind


def _duplicates(rows: list[dict[str, Any]], key: tuple[str, ...]) -> list[tuple[Any, ...]]:
    seen: set[tuple[Any, ...]] = set()
    dups = []
    for r in rows:
        k = tuple(r[c] for c in key)
        if k in seen:
            dups.append(k)
        seen.add(k)
    return dups


def snapshot_tables(snap: Snapshot) -> dict[str, pa.Table]:
    """The snapshot's rows as Arrow tables in the landing schemas (without the run columns)."""
    ts = snapshot_start(snap.taken_at)
    tables = {}
    for kind, name in zip(_ROW_KINDS, ("k8s_nodes", "k8s_pods", "k8s_namespaces"), strict=True):
        rows = _rows(snap, kind, ts)
        table = TABLES[name]
        dups = _duplicates(rows, table.key)
        if dups:
            raise InputError(f"{snap.origin}: {kind} {dups[0][1:]} appears more than once in one snapshot")
        tables[name] = pa.Table.from_pylist(rows, schema=table.schema)
    return tables


def pods_on_unknown_nodes(tables: dict[str, pa.Table]) -> list[str]:
    """``namespace/pod -> node`` for scheduled pods whose node the snapshot does not hold (judged
    only when the snapshot holds nodes at all: a dump of pods alone has none)."""
    nodes = set(tables["k8s_nodes"].column("node").to_pylist())
    if not nodes:
        return []
    pods = tables["k8s_pods"].select(["namespace", "pod", "node"]).to_pylist()
    return [f"{p['namespace']}/{p['pod']} -> {p['node']}" for p in pods if p["node"] and p["node"] not in nodes]


def land_snapshot(writer: LakeWriter, cluster: str, snap: Snapshot) -> RunRecord:
    """Write one snapshot as one atomic run; re-landing the same snapshot replaces it.

    Pods on nodes missing from the snapshot are landed (they exist) and flagged: a warning here,
    and ``gpufinops check`` (``pods_on_known_nodes``) lists them."""
    tables = snapshot_tables(snap)
    unknown = pods_on_unknown_nodes(tables)
    if unknown:
        log.warning("%s: %d pod(s) on nodes that are not in the snapshot (costed at 0 GPU-hours): %s",
                    snap.origin, len(unknown), ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else ""))
    start = snapshot_start(snap.taken_at)
    with writer.run(SOURCE, cluster, start, start + SNAPSHOT_WINDOW) as run:
        for name, table in tables.items():
            run.add(name, table, where=snap.origin)  # also declares empty tables, clearing old rows
    assert run.record is not None
    return run.record
