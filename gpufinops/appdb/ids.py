"""Identifiers of app-DB rows: random ones for changes/approvals, deterministic ones for workloads.

Workload ids are a hash of (cluster, namespace, kind, name) so a workload discovered in the
warehouse and the same workload registered through the API share one id.
"""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["workload_id", "new_change_id", "new_approval_id"]


def workload_id(cluster: str, namespace: str, kind: str, name: str) -> str:
    """``wl_`` + the first 12 hex digits of sha256("cluster/namespace/kind/name")."""
    return "wl_" + hashlib.sha256(f"{cluster}/{namespace}/{kind}/{name}".encode()).hexdigest()[:12]


def new_change_id() -> str:
    return "chg_" + secrets.token_hex(6)


def new_approval_id() -> str:
    return "apr_" + secrets.token_hex(6)
