"""DCGM samples and container usage for one cluster and one day, vectorised with numpy.

Every value is a pure function of (pod, absolute minute) through a counter-based hash, so a day
comes out the same whichever chunk or run computes it. dcgm-exporter's shape is kept: one series
per whole device, per MIG instance, and per (device, pod) on shared devices carrying the device's
values; devices without a pod still report (empty pod labels); nodes without dcgm-exporter report
nothing at all.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ingest.demo.catalog import GPU_MODELS, MIG_PROFILES
from ingest.demo.fleet import Node
from ingest.demo.scheduler import ClusterLayout
from ingest.demo.workload import PodSpec
from ingest.schema import TS

__all__ = ["GenAiSeries", "ClusterTelemetry", "noise", "expand_intervals"]

_MIB = float(1 << 20)
_GPU_CLASSES = ("whole", "mig", "timeslice", "fractional")
# activity codes (PodSpec.activity)
SERVING, TRAINING, IDLE, NOTEBOOK, BATCH = range(5)

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)
_M3 = np.uint64(0xBF58476D1CE4E5B9)
_M4 = np.uint64(0x94D049BB133111EB)


def noise(key: np.ndarray, minute: np.ndarray, salt: int) -> np.ndarray:
    """Uniform [0, 1) from (key, minute, salt): splitmix64 of a mixed counter."""
    with np.errstate(over="ignore"):
        x = key.astype(np.uint64) * _M1 ^ (minute.astype(np.uint64) + np.uint64(salt)) * _M2
        x ^= x >> np.uint64(30)
        x *= _M3
        x ^= x >> np.uint64(27)
        x *= _M4
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def expand_intervals(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For integer intervals [lo, hi): (interval index, point) of every point, without a loop."""
    count = np.maximum(hi - lo, 0)
    total = int(count.sum())
    rep = np.repeat(np.arange(len(lo)), count)
    starts = np.cumsum(count) - count
    point = lo[rep] + (np.arange(total) - starts[rep])
    return rep, point


@dataclass
class GenAiSeries:
    """The GenAI serving trace's per-pod minute series, concatenated (duty as 0-1, memory as bytes)."""

    duty: np.ndarray
    d_off: np.ndarray
    d_len: np.ndarray
    mem: np.ndarray
    m_off: np.ndarray
    m_len: np.ndarray

    @classmethod
    def load(cls, genai_dir: Path, min_points: int = 600) -> GenAiSeries:
        with gzip.open(genai_dir / "pod_gpu_duty_cycle_anon.csv.gz") as fh:
            duty = pd.read_csv(fh)
        with gzip.open(genai_dir / "pod_gpu_memory_used_bytes_anon.csv.gz") as fh:
            mem = pd.read_csv(fh)
        duty = duty.sort_values(["container_ip", "timestamp_anon"])
        mem = mem.sort_values(["container_ip", "timestamp_anon"])
        mem_groups = {ip: g["value"].to_numpy(np.float64) for ip, g in mem.groupby("container_ip", sort=True)}
        d_parts, m_parts = [], []
        for ip, g in duty.groupby("container_ip", sort=True):
            if len(g) < min_points:
                continue
            d_parts.append(np.clip(g["value"].to_numpy(np.float64) / 100.0, 0, 1))
            m = mem_groups.get(ip)
            m_parts.append(m if m is not None and len(m) >= min_points else np.full(len(g), 24e9))
        if not d_parts:
            raise ValueError(f"no GenAI duty-cycle series with ≥ {min_points} points under {genai_dir}")

        def cat(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            lens = np.array([len(p) for p in parts], dtype=np.int64)
            return np.concatenate(parts), np.cumsum(lens) - lens, lens

        d, doff, dlen = cat(d_parts)
        m, moff, mlen = cat(m_parts)
        return cls(d.astype(np.float32), doff, dlen, m.astype(np.float64), moff, mlen)

    def __len__(self) -> int:
        return len(self.d_len)


def _uid_key(uid: str) -> int:
    return int(uid.replace("-", "")[:16], 16)


class ClusterTelemetry:
    """Per-cluster arrays (pods, GPU units, holdings, containers) and the per-day generators."""

    def __init__(self, nodes: list[Node], layout: ClusterLayout, pods: list[PodSpec], genai: GenAiSeries, seed: int):
        self.nodes = nodes
        self.layout = layout
        self.pods = pods
        rng = np.random.default_rng([seed, 303])
        n_p = len(pods)
        self.pod_key = np.array([_uid_key(p.uid) for p in pods], dtype=np.uint64)
        self.activity = np.array([p.activity for p in pods], dtype=np.int64)
        self.equiv = np.array([p.gpu_equiv for p in pods], dtype=np.float64)
        # per-pod traits (drawn for every pod so the arrays stay aligned)
        self.series = rng.integers(0, len(genai), n_p)
        self.phase = rng.integers(0, 1440, n_p)
        self.base = rng.uniform(0.70, 0.95, n_p)
        self.batch_base = rng.uniform(0.45, 0.9, n_p)
        self.period = rng.integers(40, 121, n_p)
        self.memfrac = np.where(self.activity == IDLE, rng.uniform(0.05, 0.6, n_p), rng.uniform(0.55, 0.95, n_p))
        self.tensor = np.where(self.activity == SERVING, rng.uniform(0.15, 0.4, n_p), rng.uniform(0.35, 0.75, n_p))
        self.genai = genai
        self.ns_names = sorted({p.namespace for p in pods})
        ns_index = {n: i for i, n in enumerate(self.ns_names)}
        self.pod_ns = np.array([ns_index[p.namespace] for p in pods], dtype=np.int32)
        self.pod_names = pa.array([p.name for p in pods], pa.string())
        self.ns_array = pa.array(self.ns_names, pa.string())
        self.sched = np.array([p.sched for p in pods], dtype=np.float64)
        self.deleted = np.array([p.deleted for p in pods], dtype=np.float64)
        self._build_units()
        self._build_holdings()
        self._build_containers()

    # -- static tables ----------------------------------------------------------------------------
    def _build_units(self) -> None:
        """GPU units: each device of a non-MIG node, then each MIG instance."""
        lay, nodes = self.layout, self.nodes
        n_dev = len(lay.dev_node)
        mig_node = np.array([nodes[i].mode == "mig" for i in range(len(nodes))], dtype=bool)
        node_of = np.concatenate([lay.dev_node, lay.inst_node])
        dev_of = np.concatenate([np.arange(n_dev), lay.inst_dev])
        is_mig = np.concatenate([np.zeros(n_dev, bool), np.ones(len(lay.inst_node), bool)])
        # a MIG node's parent devices do not report on their own
        keep = is_mig | ~mig_node[node_of] if len(node_of) else np.zeros(0, bool)
        profiles = list(MIG_PROFILES)
        prof_code = np.concatenate([np.full(n_dev, -1), lay.inst_profile])
        self.unit_node = node_of
        self.unit_dev = dev_of
        self.unit_is_mig = is_mig
        self.unit_keep = keep & np.array([nodes[i].measured for i in node_of], dtype=bool) if len(node_of) else keep
        self.unit_gi = np.concatenate([np.full(n_dev, -1), lay.inst_gi])
        self.unit_profile = prof_code
        self.unit_shared = np.array([nodes[i].mode in ("timeslice", "fractional") for i in node_of], dtype=bool)
        mem, tdp, idle, frac = [], [], [], []
        for u in range(len(node_of)):
            model = GPU_MODELS[nodes[node_of[u]].gpu_model]
            if is_mig[u]:
                prof = MIG_PROFILES[profiles[prof_code[u]]]
                mem.append(prof.memory_mib)
                frac.append(prof.compute_slices / 7)
            else:
                mem.append(model.memory_mib)
                frac.append(1.0)
            tdp.append(model.tdp_w)
            idle.append(model.idle_w)
        self.unit_mem = np.array(mem, dtype=np.float64)
        self.unit_tdp = np.array(tdp, dtype=np.float64)
        self.unit_idle = np.array(idle, dtype=np.float64)
        self.unit_frac = np.array(frac, dtype=np.float64)
        self.unit_join = np.array([nodes[i].join_s for i in node_of], dtype=np.float64)
        self.unit_leave = np.array([nodes[i].leave_s for i in node_of], dtype=np.float64)
        self.unit_index = lay.dev_index[dev_of] if len(dev_of) else np.zeros(0, np.int64)
        host_names = [n.name for n in nodes]
        self.hosts = pa.array(host_names, pa.string())
        uuids = [u for n in nodes for u in n.gpu_uuids]
        self.uuids = pa.array(uuids, pa.string())
        self.models = pa.array([GPU_MODELS[n.gpu_model].dcgm_name if n.gpu_model else "" for n in nodes], pa.string())
        self.profile_names = pa.array(profiles, pa.string())

    def _build_holdings(self) -> None:
        n_dev = len(self.layout.dev_node)
        h_pod, h_unit = [], []
        for k, p in enumerate(self.pods):
            if p.node < 0 or p.cls not in _GPU_CLASSES:
                continue
            for d in p.devices:
                h_pod.append(k)
                h_unit.append(n_dev + d if p.cls == "mig" else d)
        self.h_pod = np.array(h_pod, dtype=np.int64)
        self.h_unit = np.array(h_unit, dtype=np.int64)
        keep = self.unit_keep[self.h_unit] if len(self.h_unit) else np.zeros(0, bool)
        self.h_pod, self.h_unit = self.h_pod[keep], self.h_unit[keep]
        self.h_t0 = self.sched[self.h_pod]
        self.h_t1 = self.deleted[self.h_pod]

    def _build_containers(self) -> None:
        c_pod, c_name, c_cpu, c_mem = [], [], [], []
        names: dict[str, int] = {}
        for k, p in enumerate(self.pods):
            if p.node < 0:
                continue
            for j, (name, req, _lim) in enumerate(p.containers):
                c_pod.append(k)
                c_name.append(names.setdefault(name, len(names)))
                side = 0.4 if j else 1.0  # sidecars idle along
                c_cpu.append(req.get("cpu", 0.1) * p.cpu_ratio * side)
                c_mem.append(req.get("memory", 512 * _MIB) * p.mem_ratio * side)
        self.c_pod = np.array(c_pod, dtype=np.int64)
        self.c_name = np.array(c_name, dtype=np.int32)
        self.c_cpu = np.array(c_cpu, dtype=np.float64)
        self.c_mem = np.array(c_mem, dtype=np.float64)
        self.container_names = pa.array(list(names), pa.string())
        self.main_container = np.array([names.get(p.containers[0][0], 0) for p in self.pods], dtype=np.int32)

    # -- activity model ---------------------------------------------------------------------------
    def activity_at(self, pod: np.ndarray, abs_min: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(utilisation 0-1 of the pod's allocation, memory used as a fraction of it)."""
        act = np.zeros(len(pod))
        mem = self.memfrac[pod].copy()
        kind = self.activity[pod]
        key = self.pod_key[pod]
        n1 = noise(key, abs_min, 1)
        g = self.genai
        m = kind == SERVING
        if m.any():
            s = self.series[pod[m]]
            t = abs_min[m] + self.phase[pod[m]]
            act[m] = g.duty[g.d_off[s] + t % g.d_len[s]]
            # the trace's pods ran on 80 GB devices: keep the fraction of memory they used
            mem[m] = np.clip(g.mem[g.m_off[s] + t % g.m_len[s]] / (80 * 1024**3), 0.02, 0.95)
        m = kind == TRAINING
        if m.any():
            per = self.period[pod[m]]
            t = abs_min[m] + self.phase[pod[m]]
            u = t % per
            a = self.base[pod[m]] + 0.08 * (n1[m] - 0.5)
            a = np.where(n1[m] < 0.06, a * 0.35, a)  # data-loading stalls
            evalp = ((t // per) % 4 == 3) & (u >= per - 10)
            a = np.where(evalp, 0.3 + 0.1 * n1[m], a)
            a = np.where(u < 2, 0.03, a)  # checkpoint write
            act[m] = a
        m = kind == IDLE
        if m.any():
            act[m] = np.where(n1[m] < 0.02, 0.02, 0.0)
        m = kind == NOTEBOOK
        if m.any():
            session = noise(key[m], abs_min[m] // 45, 2) < 0.2
            act[m] = np.where(session, 0.2 + 0.45 * n1[m], 0.004)
        m = kind == BATCH
        if m.any():
            act[m] = self.batch_base[pod[m]] + 0.2 * (n1[m] - 0.5)
        mem = mem * (0.98 + 0.04 * noise(key, abs_min, 3))
        return np.clip(act, 0.0, 1.0), np.clip(mem, 0.0, 1.0)

    # -- per-day tables ---------------------------------------------------------------------------
    def gpu_samples(self, d0: float, d1: float, step: int = 60) -> pa.Table:
        """DCGM rows for [d0, d1) every ``step`` seconds."""
        n_min = int(np.ceil((d1 - d0) / step))
        n_units = len(self.unit_node)
        base_min = int(d0 // 60)
        # rows of pods holding units
        lo = np.ceil((np.maximum(self.h_t0, d0) - d0) / step).astype(np.int64)
        hi = np.ceil((np.minimum(self.h_t1, d1) - d0) / step).astype(np.int64)
        hi = np.minimum(hi, n_min)
        rep, k = expand_intervals(lo, hi)
        pod = self.h_pod[rep]
        unit = self.h_unit[rep]
        abs_min = base_min + k * (step // 60)
        act, memf = self.activity_at(pod, abs_min)
        share = np.where(self.unit_shared[unit], self.equiv[pod], 1.0)
        cell = unit * n_min + k
        # device-level values on shared devices: the pods' demands add up (time-slicing)
        busy = np.bincount(cell, weights=act * share, minlength=n_units * n_min)
        used = np.bincount(cell, weights=memf * share, minlength=n_units * n_min)
        occupied = np.bincount(cell, minlength=n_units * n_min) > 0
        util = np.minimum(busy[cell], 1.0)
        fb_frac = np.minimum(used[cell], 0.97)
        tens = util * self.tensor[pod]
        # idle units: alive, measured, nobody holding them
        t_grid = d0 + step * np.arange(n_min)
        alive = (t_grid[None, :] >= self.unit_join[:, None]) & (t_grid[None, :] < self.unit_leave[:, None])
        alive &= self.unit_keep[:, None]
        idle_u, idle_k = np.nonzero(alive & ~occupied.reshape(n_units, n_min))
        all_unit = np.concatenate([unit, idle_u])
        all_k = np.concatenate([k, idle_k])
        all_pod = np.concatenate([pod, np.full(len(idle_u), -1)])
        all_util = np.concatenate([util, np.zeros(len(idle_u))])
        all_fb = np.concatenate([fb_frac, np.full(len(idle_u), 0.0)])
        all_tens = np.concatenate([tens, np.zeros(len(idle_u))])
        order = np.lexsort((all_pod, all_unit, all_k))
        all_unit, all_k, all_pod = all_unit[order], all_k[order], all_pod[order]
        all_util, all_fb, all_tens = all_util[order], all_fb[order], all_tens[order]
        mem_total = self.unit_mem[all_unit]
        fb_used = np.round(all_fb * mem_total)
        fb_used = np.where(all_pod < 0, 0.0, fb_used)
        ukey = all_unit.astype(np.uint64) + np.uint64(0x5EED)
        pn = noise(ukey, base_min + all_k, 4)
        frac = self.unit_frac[all_unit]
        idle_w, tdp = self.unit_idle[all_unit], self.unit_tdp[all_unit]
        power = frac * (idle_w + (tdp - idle_w) * all_util**0.9) * (0.97 + 0.06 * pn)
        is_mig = self.unit_is_mig[all_unit]
        ts = (np.int64(d0 * 1_000_000) + all_k.astype(np.int64) * step * 1_000_000)
        has_pod = all_pod >= 0
        pod_idx = pa.array(np.where(has_pod, all_pod, 0), mask=~has_pod)
        node_idx = pa.array(self.unit_node[all_unit])
        dev_idx = pa.array(self.unit_dev[all_unit])
        prof = self.unit_profile[all_unit]
        return pa.table({
            "ts": pa.array(ts, type=TS),
            "hostname": self.hosts.take(node_idx),
            "gpu": pa.array(self.unit_index[all_unit].astype(np.int32)),
            "uuid": self.uuids.take(dev_idx),
            "model_name": self.models.take(node_idx),
            "mig_profile": self.profile_names.take(pa.array(np.where(is_mig, prof, 0), mask=~is_mig)),
            "mig_instance": pa.array(self.unit_gi[all_unit].astype(np.int32), mask=~is_mig),
            "namespace": self.ns_array.take(pa.array(self.pod_ns[np.where(has_pod, all_pod, 0)], mask=~has_pod)),
            "pod": self.pod_names.take(pod_idx),
            "container": self.container_names.take(
                pa.array(self.main_container[np.where(has_pod, all_pod, 0)], mask=~has_pod)),
            "gr_engine_active": pa.array(all_util.astype(np.float32)),
            # DCGM has no GPU_UTIL for MIG instances; only the profiling field is there
            "gpu_util": pa.array(np.round(all_util * 100).astype(np.float32), mask=is_mig),
            "fb_used_mib": pa.array(fb_used.astype(np.float32)),
            "fb_free_mib": pa.array((mem_total - fb_used).astype(np.float32)),
            "power_w": pa.array(power.astype(np.float32)),
            "tensor_active": pa.array(all_tens.astype(np.float32)),
        })

    def container_usage(self, d0: float, d1: float, step: int = 60) -> pa.Table:
        n_min = int(np.ceil((d1 - d0) / step))
        t0 = self.sched[self.c_pod]
        t1 = self.deleted[self.c_pod]
        lo = np.ceil((np.maximum(t0, d0) - d0) / step).astype(np.int64)
        hi = np.minimum(np.ceil((np.minimum(t1, d1) - d0) / step).astype(np.int64), n_min)
        rep, k = expand_intervals(lo, hi)
        order = np.argsort(k, kind="stable")
        rep, k = rep[order], k[order]
        pod = self.c_pod[rep]
        abs_min = int(d0 // 60) + k * (step // 60)
        key = self.pod_key[pod] + self.c_name[rep].astype(np.uint64)
        n1 = noise(key, abs_min, 5)
        n2 = noise(key, abs_min, 6)
        cpu = self.c_cpu[rep] * (0.7 + 0.6 * n1)
        mem = self.c_mem[rep] * (0.97 + 0.06 * n2)
        ts = np.int64(d0 * 1_000_000) + k.astype(np.int64) * step * 1_000_000
        return pa.table({
            "ts": pa.array(ts, type=TS),
            "namespace": self.ns_array.take(pa.array(self.pod_ns[pod])),
            "pod": self.pod_names.take(pa.array(pod)),
            "container": self.container_names.take(pa.array(self.c_name[rep])),
            "cpu_cores": pa.array(cpu.astype(np.float32)),
            "memory_working_set_bytes": pa.array(np.round(mem)),
        })
