"""What-if changes to an inventory or a workload, parsed from the simulate command's options.

- ``add``: ``N:MODEL`` clones the first node of that GPU model N times, or
  ``N:MODEL:GPUS:CPU_MILLI:MEMORY_MIB`` adds N nodes of a new type;
- ``remove``: ``N:MODEL`` drops the last N nodes of that model;
- ``mig``: ``MODEL:SLICES`` gives every GPU of that model a MIG layout of equal slices (a shared
  pod takes whole slices, rounded up; a whole-GPU pod needs an unsliced device);
- ``timeslice``: ``MODEL:REPLICAS`` enables time-slicing (every GPU request takes one replica);
- ``constrain``: ``SPEC[@PCT]`` makes PCT % (default 100) of the GPU pods, chosen with the seed,
  ask for the models in SPEC (``A|B``).
"""

from __future__ import annotations

import numpy as np

from simulator.inputs import MILLI, Inventory, SimInputError, Workload

__all__ = ["apply_inventory_changes", "apply_constraint"]


def _parts(opt: str, text: str, n: int) -> list[str]:
    parts = [p.strip() for p in text.split(":")]
    if len(parts) < n or any(not p for p in parts):
        raise SimInputError(f"--{opt} {text!r}: expected {n} ':'-separated fields")
    return parts


def _num(opt: str, text: str, value: str) -> int:
    try:
        v = int(value)
    except ValueError:
        raise SimInputError(f"--{opt} {text!r}: {value!r} is not a whole number") from None
    if v <= 0:
        raise SimInputError(f"--{opt} {text!r}: {value!r} must be positive")
    return v


def apply_inventory_changes(inv: Inventory, *, add: list[str] = (), remove: list[str] = (),  # type: ignore[assignment]
                            mig: list[str] = (), timeslice: list[str] = ()) -> Inventory:  # type: ignore[assignment]
    for text in remove:
        n_s, model = _parts("remove-nodes", text, 2)[:2]
        n = _num("remove-nodes", text, n_s)
        idx = [i for i, m in enumerate(inv.models) if m == model]
        if len(idx) < n:
            raise SimInputError(f"--remove-nodes {text!r}: only {len(idx)} nodes of model {model!r}")
        keep = np.ones(len(inv), bool)
        keep[idx[len(idx) - n:]] = False
        inv = inv.subset(keep)
    for text in add:
        parts = _parts("add-nodes", text, 2)
        n = _num("add-nodes", text, parts[0])
        model = parts[1]
        if len(parts) >= 5:
            g, c, m = (_num("add-nodes", text, p) for p in parts[2:5])
        else:
            src = [i for i, mm in enumerate(inv.models) if mm == model]
            if not src:
                raise SimInputError(f"--add-nodes {text!r}: no node of model {model!r} to copy; "
                                    "give N:MODEL:GPUS:CPU_MILLI:MEMORY_MIB")
            g, c, m = int(inv.gpus[src[0]]), int(inv.cpu_milli[src[0]]), int(inv.memory_mib[src[0]])
        new = Inventory([f"whatif-{model}-{k}" for k in range(n)], np.full(n, c, np.int64), np.full(n, m, np.int64),
                        np.full(n, g, np.int64), [model] * n)
        inv = inv.extend(new)
    for opt, items, ts in (("mig", mig, False), ("timeslice", timeslice, True)):
        for text in items:
            model, k_s = _parts(opt, text, 2)[:2]
            k = _num(opt, text, k_s)
            sel = np.array([m == model for m in inv.models])
            if not sel.any():
                raise SimInputError(f"--{opt} {text!r}: no node of model {model!r}")
            inv.quantum = np.where(sel, MILLI // k, inv.quantum)
            inv.timeslice = np.where(sel, ts, inv.timeslice)
    return inv


def apply_constraint(work: Workload, spec_text: str | None, seed: int = 0) -> Workload:
    if not spec_text:
        return work
    spec, _, pct_s = spec_text.partition("@")
    pct = float(pct_s) if pct_s else 100.0
    if not spec.strip() or not 0 < pct <= 100:
        raise SimInputError(f"--constrain {spec_text!r}: expected MODEL[|MODEL]@PCT with 0 < PCT <= 100")
    rng = np.random.default_rng(seed)
    gpu = np.flatnonzero(work.num_gpu > 0)
    chosen = set(rng.choice(gpu, size=int(round(len(gpu) * pct / 100)), replace=False).tolist()) if gpu.size else set()
    return work.with_spec([spec.strip() if i in chosen else s for i, s in enumerate(work.gpu_spec)])
