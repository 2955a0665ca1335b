"""Reference facts the demo fleet is built from: GPU models, MIG layouts and instance types.

Instance types come from the price card so every node the demo makes has a price.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ingest.price_card import CardRow, read_price_card

__all__ = [
    "GpuModel",
    "GPU_MODELS",
    "MigProfile",
    "MIG_PROFILES",
    "MIG_LAYOUT",
    "MIG_CONFIG_NAME",
    "TRACE_MODEL_MAP",
    "InstanceCatalog",
]


@dataclass(frozen=True)
class GpuModel:
    key: str  # the price card's gpu_model
    product: str  # GFD label nvidia.com/gpu.product
    dcgm_name: str  # DCGM modelName label
    memory_mib: int
    tdp_w: float
    idle_w: float


GPU_MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in [
        GpuModel("A100-80GB", "NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 81920, 400, 60),
        GpuModel("A100-40GB", "NVIDIA-A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", 40960, 400, 55),
        GpuModel("H100-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 81559, 700, 70),
        GpuModel("T4", "Tesla-T4", "Tesla T4", 15360, 70, 12),
        GpuModel("V100-16GB", "Tesla-V100-SXM2-16GB", "Tesla V100-SXM2-16GB", 16160, 300, 40),
        GpuModel("V100-32GB", "Tesla-V100-SXM2-32GB", "Tesla V100-SXM2-32GB", 32510, 300, 42),
        GpuModel("P100-16GB", "Tesla-P100-PCIE-16GB", "Tesla P100-PCIE-16GB", 16280, 250, 30),
        GpuModel("A10G", "NVIDIA-A10G", "NVIDIA A10G", 23028, 300, 25),
        GpuModel("A10", "NVIDIA-A10", "NVIDIA A10", 23028, 150, 20),
        GpuModel("L4", "NVIDIA-L4", "NVIDIA L4", 23034, 72, 16),
    ]
}


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. 1g.10gb
    compute_slices: int
    memory_slices: int
    memory_mib: int
    gi_profile_id: int  # nvidia-smi's GPU instance profile id, used for GPU_I_ID numbering

    @property
    def gpu_equiv(self) -> float:
        """DESIGN §3: max(g/7, memory_slices/8)."""
        return max(self.compute_slices / 7, self.memory_slices / 8)

    @property
    def resource(self) -> str:
        return f"nvidia.com/mig-{self.name}"


# A100-80GB / H100 profiles (memory slices per DESIGN §3).
MIG_PROFILES: dict[str, MigProfile] = {
    p.name: p
    for p in [
        MigProfile("1g.10gb", 1, 1, 9728, 19),
        MigProfile("2g.20gb", 2, 2, 19968, 14),
        MigProfile("3g.40gb", 3, 4, 40192, 9),
    ]
}

# Per-GPU layouts of the demo's MIG pool (a custom mig-parted config). NVIDIA's `all-balanced`
# (2×1g.10gb + 2g.20gb + 3g.40gb) sums to 1.07 GPU-equivalents under DESIGN §3's max(g/7, mem/8),
# so a fully used node would read as over-allocated; these layouts sum to ≤ 1 and stay mixed.
MIG_CONFIG_NAME = "custom-mixed"
MIG_LAYOUT: tuple[tuple[str, ...], ...] = (
    ("3g.40gb", "2g.20gb", "1g.10gb"),  # even GPUs: 0.5 + 0.286 + 0.143 = 0.93
    ("3g.40gb", "3g.40gb"),  # odd GPUs: 1.0
)

# openb's trace model -> price-card model, per provider (a model a provider does not sell maps to
# the nearest one it does; G2/G3 are undisclosed in the trace and become A100-80GB / H100 pools).
TRACE_MODEL_MAP: dict[str, dict[str, str]] = {
    "G2": {"aws": "A100-80GB", "gcp": "A100-80GB", "azure": "A100-80GB"},
    "G3": {"aws": "H100-80GB", "gcp": "H100-80GB", "azure": "H100-80GB"},
    "T4": {"aws": "T4", "gcp": "T4", "azure": "T4"},
    "P100": {"aws": "V100-16GB", "gcp": "P100-16GB", "azure": "P100-16GB"},
    "V100M16": {"aws": "V100-16GB", "gcp": "V100-16GB", "azure": "V100-16GB"},
    "V100M32": {"aws": "V100-32GB", "gcp": "V100-16GB", "azure": "V100-32GB"},
    "A10": {"aws": "A10G", "gcp": "L4", "azure": "A10"},
}


class InstanceCatalog:
    """Instance types of the price card, looked up by provider, GPU model and count."""

    def __init__(self, price_card: Path | str):
        self.rows: list[CardRow] = read_price_card(price_card)
        self.by_type: dict[tuple[str, str], CardRow] = {(r.provider, r.instance_type): r for r in self.rows}
        self.region: dict[str, str] = {}
        for r in self.rows:
            self.region.setdefault(r.provider, r.region)

    def gpu_instance(self, provider: str, model: str, count: int, *, exact: bool = False) -> CardRow | None:
        """The smallest type with ≥ ``count`` GPUs of ``model`` (else the largest); ``exact``: = count."""
        cands = sorted(
            (r for r in self.rows if r.provider == provider and r.gpu_model == model and r.gpu_count > 0),
            key=lambda r: (r.gpu_count, r.on_demand_usd_per_hour),
        )
        if exact:
            cands = [r for r in cands if r.gpu_count == count]
            return cands[0] if cands else None
        for r in cands:
            if r.gpu_count >= count:
                return r
        return cands[-1] if cands else None

    def cpu_instance(self, provider: str, vcpu: int, memory_gib: float) -> CardRow:
        """The cheapest CPU-only type with at least the given size (else the largest)."""
        cands = sorted(
            (r for r in self.rows if r.provider == provider and r.gpu_count == 0),
            key=lambda r: (r.on_demand_usd_per_hour, r.vcpu),
        )
        if not cands:
            raise KeyError(f"the price card has no CPU-only instance type for provider {provider!r}")
        for r in cands:
            if r.vcpu >= vcpu and r.memory_gib >= memory_gib:
                return r
        return max(cands, key=lambda r: (r.vcpu, r.memory_gib))
