"""MIG profiles per GPU model (DESIGN §3 table) and the smallest profile that fits a workload.

The table is read from the dbt seed ``seeds/mig_profiles.csv`` when it exists (so the warehouse
and the recommender agree); otherwise the DESIGN §3 table below is the one definition.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from gpufinops.project import PROJECT_DIR

__all__ = ["MigProfile", "mig_profiles", "normalise_gpu_model", "smallest_fitting_profile", "has_mig"]

_SEED = PROJECT_DIR / "seeds" / "mig_profiles.csv"
_PROFILE_RE = re.compile(r"^(?:nvidia\.com/mig-)?(\d+)g\.(\d+)gb$")

# DESIGN §3: memory slices (of 8) per profile; compute slices (of 7) are the "<g>g" of the name.
_DESIGN_TABLE: dict[str, dict[str, int]] = {
    "A100-40GB": {"1g.5gb": 1, "1g.10gb": 2, "2g.10gb": 2, "3g.20gb": 4, "4g.20gb": 4, "7g.40gb": 8},
    "A100-80GB": {"1g.10gb": 1, "1g.20gb": 2, "2g.20gb": 2, "3g.40gb": 4, "4g.40gb": 4, "7g.80gb": 8},
    "H100": {"1g.10gb": 1, "1g.20gb": 2, "2g.20gb": 2, "3g.40gb": 4, "4g.40gb": 4, "7g.80gb": 8},
    "H200": {"1g.18gb": 1, "1g.35gb": 2, "2g.35gb": 2, "3g.71gb": 4, "4g.71gb": 4, "7g.141gb": 8},
}


@dataclass(frozen=True)
class MigProfile:
    gpu_model: str
    profile: str
    compute_slices: int  # of 7
    memory_slices: int  # of 8
    memory_gib: float  # nominal, from the profile name

    @property
    def gpu_equiv(self) -> float:
        """DESIGN §3: max(g/7, memory_slices/8)."""
        return max(self.compute_slices / 7.0, self.memory_slices / 8.0)

    @property
    def resource(self) -> str:
        return f"nvidia.com/mig-{self.profile}"


def normalise_gpu_model(product: str | None, memory_mib: float | None = None) -> str | None:
    """Map a GFD product string (``NVIDIA-A100-SXM4-80GB``) or short name to a table key."""
    if not product:
        return None
    p = product.upper()
    if "H200" in p:
        return "H200"
    if "H100" in p:
        return "H100"
    if "A100" in p:
        if "80GB" in p or (memory_mib is not None and memory_mib > 50_000):
            return "A100-80GB"
        return "A100-40GB"
    return product


def _from_rows(rows: list[dict[str, str]]) -> dict[str, list[MigProfile]]:
    out: dict[str, list[MigProfile]] = {}
    for row in rows:
        model = (row.get("gpu_family") or row.get("gpu_model") or row.get("model") or "").strip()
        profile = (row.get("profile") or row.get("mig_profile") or "").strip()
        m = _PROFILE_RE.match(profile)
        if not model or not m:
            continue
        slices = row.get("memory_slices") or row.get("mem_slices")
        if not slices:
            continue
        compute = int(float(row.get("compute_slices") or m.group(1)))
        out.setdefault(normalise_gpu_model(model) or model, []).append(
            MigProfile(model, m.group(0).removeprefix("nvidia.com/mig-"), compute, int(float(slices)), float(m.group(2)))
        )
    return out


@lru_cache(maxsize=4)
def mig_profiles(seed: Path | None = None) -> dict[str, tuple[MigProfile, ...]]:
    """Profiles per normalised GPU model, smallest GPU-equivalent first."""
    path = seed or _SEED
    table: dict[str, list[MigProfile]] = {}
    if path.is_file():
        with path.open(newline="") as fh:
            table = _from_rows(list(csv.DictReader(fh)))
    if not table:
        for model, profiles in _DESIGN_TABLE.items():
            for name, slices in profiles.items():
                m = _PROFILE_RE.match(name)
                assert m is not None
                table.setdefault(model, []).append(MigProfile(model, name, int(m.group(1)), slices, float(m.group(2))))
    return {k: tuple(sorted(v, key=lambda p: (p.gpu_equiv, p.memory_gib))) for k, v in table.items()}


def has_mig(gpu_model: str | None) -> bool:
    return normalise_gpu_model(gpu_model) in mig_profiles()


def smallest_fitting_profile(
    gpu_model: str | None, peak_memory_mib: float, *, headroom: float = 0.2, compute_p95: float = 0.0
) -> MigProfile | None:
    """The smallest profile (by GPU-equivalent) whose memory holds peak × (1 + headroom) and whose
    compute share (g/7) holds the p95 utilisation; None when the model has no MIG or nothing fits."""
    profiles = mig_profiles().get(normalise_gpu_model(gpu_model) or "")
    if not profiles:
        return None
    need_gib = peak_memory_mib * (1.0 + headroom) / 1024.0
    for p in profiles:
        if p.memory_gib >= need_gib and p.compute_slices / 7.0 >= compute_p95:
            return p
    return None
