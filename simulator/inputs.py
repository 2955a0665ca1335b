"""Node inventories and workloads: openb CSV files (the columns of the Alibaba 2023 GPU trace)."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from gpufinops.errors import InputError

__all__ = ["Inventory", "Workload", "load_openb_nodes", "load_openb_pods", "SimInputError"]

MILLI = 1000
_NODE_COLS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_COLS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class SimInputError(InputError):
    """A simulator input that cannot be read: names the file, row and column."""


@dataclass
class Inventory:
    """Nodes: one entry per node. ``quantum`` (milli GPU) is 0 for plain devices, the MIG slice
    size for a MIG layout, or the replica size for time-slicing (``timeslice`` True)."""

    names: list[str]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    gpus: np.ndarray
    models: list[str]
    pools: list[str] = field(default_factory=list)
    quantum: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    timeslice: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def __post_init__(self) -> None:
        n = len(self.names)
        if not self.pools:
            self.pools = list(self.models)
        if self.quantum.size != n:
            self.quantum = np.zeros(n, dtype=np.int64)
        if self.timeslice.size != n:
            self.timeslice = np.zeros(n, dtype=bool)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())

    def subset(self, keep: np.ndarray) -> Inventory:
        idx = np.flatnonzero(keep)
        return Inventory([self.names[i] for i in idx], self.cpu_milli[idx], self.memory_mib[idx], self.gpus[idx],
                         [self.models[i] for i in idx], [self.pools[i] for i in idx], self.quantum[idx],
                         self.timeslice[idx])

    def extend(self, other: Inventory) -> Inventory:
        return Inventory(self.names + other.names, np.concatenate([self.cpu_milli, other.cpu_milli]),
                         np.concatenate([self.memory_mib, other.memory_mib]), np.concatenate([self.gpus, other.gpus]),
                         self.models + other.models, self.pools + other.pools,
                         np.concatenate([self.quantum, other.quantum]), np.concatenate([self.timeslice, other.timeslice]))


@dataclass
class Workload:
    """Pods: CPU (milli), memory (MiB), GPU count and milli-GPU per GPU, and the GPU models each
    may use (``""`` = any; ``"A|B"`` = A or B)."""

    names: list[str]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    gpu_spec: list[str]

    def __len__(self) -> int:
        return len(self.names)

    def take(self, idx: np.ndarray) -> Workload:
        return Workload([self.names[i] for i in idx], self.cpu_milli[idx], self.memory_mib[idx], self.num_gpu[idx],
                        self.gpu_milli[idx], [self.gpu_spec[i] for i in idx])

    def with_spec(self, spec: list[str]) -> Workload:
        return replace(self, gpu_spec=spec)

    @property
    def total_milli(self) -> np.ndarray:
        return self.num_gpu * self.gpu_milli


def _rows(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise SimInputError(f"{path}: missing column(s) {', '.join(missing)} (need {', '.join(required)})")
            return list(reader)
    except OSError as exc:
        raise SimInputError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def _int(path: Path, line: int, row: dict[str, str], col: str, *, minimum: int = 0) -> int:
    raw = (row.get(col) or "").strip()
    try:
        v = int(float(raw))
    except ValueError:
        raise SimInputError(f"{path}: row {line}: column {col!r} is not a number: {raw!r}") from None
    if v < minimum:
        raise SimInputError(f"{path}: row {line}: column {col!r} must be >= {minimum}, got {v}")
    return v


def load_openb_nodes(path: str | Path) -> Inventory:
    path = Path(path)
    rows = _rows(path, _NODE_COLS)
    if not rows:
        raise SimInputError(f"{path}: no nodes")
    names, cpu, mem, gpu, model = [], [], [], [], []
    for i, r in enumerate(rows, start=2):
        names.append(r["sn"].strip() or f"node-{i}")
        cpu.append(_int(path, i, r, "cpu_milli"))
        mem.append(_int(path, i, r, "memory_mib"))
        g = _int(path, i, r, "gpu")
        gpu.append(g)
        m = (r.get("model") or "").strip()
        if g > 0 and not m:
            raise SimInputError(f"{path}: row {i}: a node with {g} GPUs needs a 'model'")
        model.append(m if g > 0 else "")
    return Inventory(names, np.array(cpu, np.int64), np.array(mem, np.int64), np.array(gpu, np.int64), model)


def load_openb_pods(path: str | Path) -> Workload:
    path = Path(path)
    rows = _rows(path, _POD_COLS)
    if not rows:
        raise SimInputError(f"{path}: no pods")
    names, cpu, mem, ng, gm, spec = [], [], [], [], [], []
    for i, r in enumerate(rows, start=2):
        n, m = _int(path, i, r, "num_gpu"), _int(path, i, r, "gpu_milli")
        if m > MILLI:
            raise SimInputError(f"{path}: row {i}: gpu_milli {m} above {MILLI} (it is per GPU)")
        if n > 1 and m < MILLI:
            raise SimInputError(f"{path}: row {i}: a pod sharing a GPU ({m} milli) may ask for one GPU, not {n}")
        if n == 0:
            m = 0
        elif m == 0:
            raise SimInputError(f"{path}: row {i}: num_gpu {n} with gpu_milli 0")
        names.append(r["name"].strip() or f"pod-{i}")
        cpu.append(_int(path, i, r, "cpu_milli"))
        mem.append(_int(path, i, r, "memory_mib"))
        ng.append(n)
        gm.append(m)
        spec.append((r.get("gpu_spec") or "").strip() if n else "")
    return Workload(names, np.array(cpu, np.int64), np.array(mem, np.int64), np.array(ng, np.int64),
                    np.array(gm, np.int64), spec)
