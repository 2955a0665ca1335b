"""MIG profiles (the warehouse's ``mig_profiles`` seed table) and the smallest profile that fits.

The table lives only in ``seeds/mig_profiles.csv``; the loader reads it from the warehouse
(:func:`load_mig_profiles`) into :attr:`RecommenderInput.mig_profiles`, keyed by the warehouse's
GPU family (macro ``gpu_family``, carried by ``fct_nodes_latest``). The functions here are pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from recommender.model import MigProfile

__all__ = ["MigProfile", "MigTable", "load_mig_profiles", "smallest_fitting_profile", "has_mig"]

MigTable = Mapping[str, tuple[MigProfile, ...]]
_MEMORY_RE = re.compile(r"^\d+g\.(\d+)gb$")


def load_mig_profiles(con: Any) -> dict[str, tuple[MigProfile, ...]]:
    """Profiles per GPU family, smallest GPU-equivalent first (``con``: a DuckDB connection to the warehouse)."""
    rows = con.execute("select gpu_family, profile, compute_slices, memory_slices from mig_profiles").fetchall()
    table: dict[str, list[MigProfile]] = {}
    for family, profile, compute, memory in rows:
        m = _MEMORY_RE.match(profile or "")
        if not family or m is None or compute is None or memory is None:
            continue
        table.setdefault(family, []).append(MigProfile(family, profile, int(compute), int(memory), float(m.group(1))))
    return {k: tuple(sorted(v, key=lambda p: (p.gpu_equiv, p.memory_gib))) for k, v in table.items()}


def has_mig(table: MigTable, gpu_family: str | None) -> bool:
    return bool(gpu_family and table.get(gpu_family))


def smallest_fitting_profile(table: MigTable, gpu_family: str | None, peak_memory_mib: float, *,
                             headroom: float = 0.2, compute_p95: float = 0.0) -> MigProfile | None:
    """The smallest profile (by GPU-equivalent) whose memory holds peak × (1 + headroom) and whose
    compute share (g/7) holds the p95 utilisation; None when the family has no MIG or nothing fits."""
    profiles = table.get(gpu_family or "")
    if not profiles:
        return None
    need_gib = peak_memory_mib * (1.0 + headroom) / 1024.0
    for p in profiles:
        if p.memory_gib >= need_gib and p.compute_slices / 7.0 >= compute_p95:
            return p
    return None
