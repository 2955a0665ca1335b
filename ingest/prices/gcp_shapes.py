"""The GCE machine shapes we compose prices for: vCPUs, memory (GiB) and GPUs per machine type.

GCP prices a VM by component (per vCPU-hour, per GiB-hour, per GPU-hour), so an instance price
is the sum over its shape. N1 machines take attached GPUs; such a node is priced as the instance
type ``<n1 type>+<count>x<accelerator>`` (e.g. ``n1-standard-32+4xnvidia-tesla-t4``), the
accelerator named as in the GKE label ``cloud.google.com/gke-accelerator``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MachineShape", "GCE_SHAPES", "N1_ATTACHABLE", "shape_of"]


@dataclass(frozen=True)
class MachineShape:
    name: str
    family: str  # the component-price family: n1 | n2 | a2 | a3 | g2
    vcpus: int
    memory_gib: float
    gpu: str | None = None  # accelerator name as GKE labels it
    gpus: int = 0


def _fixed() -> list[MachineShape]:
    shapes = [
        MachineShape("a2-highgpu-1g", "a2", 12, 85, "nvidia-tesla-a100", 1),
        MachineShape("a2-highgpu-2g", "a2", 24, 170, "nvidia-tesla-a100", 2),
        MachineShape("a2-highgpu-4g", "a2", 48, 340, "nvidia-tesla-a100", 4),
        MachineShape("a2-highgpu-8g", "a2", 96, 680, "nvidia-tesla-a100", 8),
        MachineShape("a2-megagpu-16g", "a2", 96, 1360, "nvidia-tesla-a100", 16),
        MachineShape("a2-ultragpu-1g", "a2", 12, 170, "nvidia-a100-80gb", 1),
        MachineShape("a2-ultragpu-2g", "a2", 24, 340, "nvidia-a100-80gb", 2),
        MachineShape("a2-ultragpu-4g", "a2", 48, 680, "nvidia-a100-80gb", 4),
        MachineShape("a2-ultragpu-8g", "a2", 96, 1360, "nvidia-a100-80gb", 8),
        MachineShape("a3-highgpu-1g", "a3", 26, 234, "nvidia-h100-80gb", 1),
        MachineShape("a3-highgpu-2g", "a3", 52, 468, "nvidia-h100-80gb", 2),
        MachineShape("a3-highgpu-4g", "a3", 104, 936, "nvidia-h100-80gb", 4),
        MachineShape("a3-highgpu-8g", "a3", 208, 1872, "nvidia-h100-80gb", 8),
    ]
    for vcpus, gpus in ((4, 1), (8, 1), (12, 1), (16, 1), (24, 2), (32, 1), (48, 4), (96, 8)):
        shapes.append(MachineShape(f"g2-standard-{vcpus}", "g2", vcpus, 4.0 * vcpus, "nvidia-l4", gpus))
    for vcpus in (1, 2, 4, 8, 16, 32, 64, 96):
        shapes.append(MachineShape(f"n1-standard-{vcpus}", "n1", vcpus, 3.75 * vcpus))
    for vcpus in (2, 4, 8, 16, 32, 64, 96):
        shapes.append(MachineShape(f"n1-highmem-{vcpus}", "n1", vcpus, 6.5 * vcpus))
    # CPU-only N2 nodes (system pools, CPU work next to the GPU pools).
    for vcpus in (2, 4, 8, 16, 32, 48, 64, 80, 96, 128):
        shapes.append(MachineShape(f"n2-standard-{vcpus}", "n2", vcpus, 4.0 * vcpus))
    return shapes


# Attachable GPUs on N1: accelerator -> {count: max vCPUs of the host for that count} (GCE docs).
N1_ATTACHABLE: dict[str, dict[int, int]] = {
    "nvidia-tesla-t4": {1: 48, 2: 48, 4: 96},
    "nvidia-tesla-v100": {1: 12, 2: 24, 4: 48, 8: 96},
    "nvidia-tesla-p100": {1: 16, 2: 32, 4: 64},
}


def _with_attached(base: list[MachineShape]) -> list[MachineShape]:
    out = list(base)
    for shape in base:
        if shape.family != "n1":
            continue
        for gpu, limits in N1_ATTACHABLE.items():
            for count, max_vcpus in limits.items():
                if shape.vcpus <= max_vcpus:
                    out.append(MachineShape(f"{shape.name}+{count}x{gpu}", "n1", shape.vcpus, shape.memory_gib, gpu, count))
    return out


GCE_SHAPES: dict[str, MachineShape] = {s.name: s for s in _with_attached(_fixed())}


def shape_of(instance_type: str) -> MachineShape | None:
    return GCE_SHAPES.get(instance_type)
