"""Request and token counters of the demo's GPU serving pods, shaped by the real GenAI trace's QPS.

``genai/qps.csv.gz`` (Alibaba GenAI serving trace 2026) holds per-container gateway QPS samples over
~23 h. Each serving pod replays one container's series as requests per minute (the sample's QPS × 60
in the minute it falls in, 0 in minutes without a sample, the series repeating), scaled by a per-pod
replica factor so that the demo's model servers see a realistic spread of load. What is synthetic:
the scale factor and the tokens per request (a per-pod prompt and generation length, constant),
since the trace is an image-generation service that counts no tokens. The counters are cumulative
from the pod's start, as vLLM's ``vllm:request_success_total`` / ``vllm:prompt_tokens_total`` /
``vllm:generation_tokens_total`` are, so the warehouse reads them as Prometheus' increase() would.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ingest.schema import TS, get_table

__all__ = ["QpsSeries", "ServingCounters"]


@dataclass
class QpsSeries:
    """Requests per minute of each trace container, concatenated; ``prefix`` is the running total."""

    per_min: np.ndarray
    prefix: np.ndarray  # prefix[off + i] = Σ per_min[off : off + i] (one extra slot per series)
    off: np.ndarray
    length: np.ndarray

    @classmethod
    def load(cls, genai_dir: Path, min_samples: int = 50) -> QpsSeries:
        with gzip.open(genai_dir / "qps.csv.gz") as fh:
            q = pd.read_csv(fh)
        q = q.dropna(subset=["container_ip"])
        t0 = float(q["timestamp_anon"].min())
        span = int((float(q["timestamp_anon"].max()) - t0) // 60) + 1
        parts = []
        for _, g in q.groupby("container_ip", sort=True):
            if len(g) < min_samples:
                continue
            minute = ((g["timestamp_anon"].to_numpy(np.float64) - t0) // 60).astype(np.int64)
            series = np.zeros(span)
            np.maximum.at(series, minute, g["value"].to_numpy(np.float64) * 60.0)
            parts.append(series)
        if not parts:
            raise ValueError(f"no GenAI QPS series with ≥ {min_samples} samples under {genai_dir}")
        lens = np.array([len(p) for p in parts], dtype=np.int64)
        prefix = np.concatenate([np.concatenate([[0.0], np.cumsum(p)]) for p in parts])
        return cls(np.concatenate(parts), prefix, np.cumsum(lens + 1) - (lens + 1), lens)

    def __len__(self) -> int:
        return len(self.length)

    def total(self, s: np.ndarray, minutes: np.ndarray) -> np.ndarray:
        """Requests of series ``s`` over its first ``minutes`` minutes (repeating), vectorised."""
        length = self.length[s]
        whole, part = np.divmod(minutes, length)
        return whole * self.prefix[self.off[s] + length] + self.prefix[self.off[s] + part]


class ServingCounters:
    """The counters of a cluster's serving pods (``serving_requests`` rows) for a time range."""

    def __init__(self, pods: list, qps: QpsSeries, seed: int, serving_activity: int):
        rng = np.random.default_rng([seed, 404])
        n = len(pods)
        self.pods = pods
        self.serving = np.array([p.activity == serving_activity and p.gpu_equiv > 0 for p in pods], dtype=bool)
        self.series = rng.integers(0, len(qps), n)
        self.phase = rng.integers(0, 1440, n)
        self.scale = rng.uniform(4.0, 40.0, n)  # replicas behind the trace's gateway share (synthetic)
        self.prompt_len = rng.uniform(200.0, 1200.0, n).round()
        self.gen_len = rng.uniform(60.0, 400.0, n).round()
        self.qps = qps

    def table(self, d0: float, d1: float, step: int = 60) -> pa.Table:
        schema = get_table("serving_requests").schema
        idx = [int(i) for i in np.flatnonzero(self.serving)]
        ts_list, ns, pod, model, req, who = [], [], [], [], [], []
        for i in idx:
            p = self.pods[i]
            start, end = p.sched, p.deleted if np.isfinite(p.deleted) else np.inf
            if not np.isfinite(start):
                continue
            lo = max(d0, start)
            hi = min(d1, end)
            if hi <= lo:
                continue
            first = np.ceil(lo / step) * step
            ts = np.arange(first, hi, step)
            if ts.size == 0:
                continue
            # minutes served since the pod started, on the trace's clock (shifted by the pod's phase)
            up = ((ts - start) // 60).astype(np.int64)
            s = np.full(ts.size, self.series[i])
            begin = np.full(ts.size, self.phase[i], dtype=np.int64)
            served = self.qps.total(s, begin + up) - self.qps.total(s, begin)
            ts_list.append(ts)
            req.append(np.floor(served * self.scale[i]))
            who.append(np.full(ts.size, i))
            ns += [p.namespace] * ts.size
            pod += [p.name] * ts.size
            model += [p.owner_name] * ts.size
        if not ts_list:
            return schema.empty_table()
        ts_all = np.concatenate(ts_list)
        req_all = np.concatenate(req)
        pods_idx = np.concatenate(who)
        return pa.table({
            "ts": pa.array((ts_all * 1e6).astype(np.int64), pa.int64()).cast(TS),
            "namespace": pa.array(ns, pa.string()),
            "pod": pa.array(pod, pa.string()),
            "model": pa.array(model, pa.string()),
            "requests_total": pa.array(req_all, pa.float64()),
            "prompt_tokens_total": pa.array(req_all * self.prompt_len[pods_idx], pa.float64()),
            "generation_tokens_total": pa.array(req_all * self.gen_len[pods_idx], pa.float64()),
        }, schema=schema)
