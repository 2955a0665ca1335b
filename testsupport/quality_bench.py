"""Measure the quality gate's overhead: ``python -m testsupport.quality_bench [--rows N] [--repeat R]``.

Builds a clean gpu_samples-shaped batch (DCGM: 1,000 devices per timestamp, a few MIG and shared
series) and times, per million rows: the gate on the clean batch, conforming the batch to the
landing schema and writing it as Parquet (what the writer does anyway), the commit-time key scan
across a run's overlapping batches, and the gate on a batch with one bad value (which pays for GX
on the failure path).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.lake import conform
from ingest.quality.gate import QualityGate
from ingest.schema import TABLES, TS

__all__ = ["synthetic_gpu_samples", "main"]


def synthetic_gpu_samples(rows: int, *, devices: int = 1000, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    i = np.arange(rows)
    dev = i % devices
    t0 = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
    busy = rng.random(rows, dtype=np.float32)
    return pa.table(
        {
            "ts": pa.array(t0 + (i // devices) * 60_000_000, pa.int64()).cast(TS),
            "hostname": pa.array(np.char.add("node-", (dev // 8).astype(str))).dictionary_encode(),
            "gpu": pa.array((dev % 8).astype(np.int32)),
            "uuid": pa.array(np.char.add("GPU-", dev.astype(str))).dictionary_encode(),
            "model_name": pa.array(["NVIDIA H100 80GB HBM3"] * rows).dictionary_encode(),
            "namespace": pa.array(np.char.add("team-", (dev % 40).astype(str))).dictionary_encode(),
            "pod": pa.array(np.char.add("pod-", (dev // 2).astype(str))).dictionary_encode(),
            "container": pa.array(["main"] * rows).dictionary_encode(),
            "gr_engine_active": pa.array(busy),
            "gpu_util": pa.array(busy * 100),
            "fb_used_mib": pa.array(rng.random(rows, dtype=np.float32) * 80_000),
            "fb_free_mib": pa.array(rng.random(rows, dtype=np.float32) * 1_000),
            "power_w": pa.array(60 + busy * 600),
            "tensor_active": pa.array(busy * 0.5),
        }
    )


def _time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    table = TABLES["gpu_samples"]
    data = conform(table, synthetic_gpu_samples(args.rows))
    gate = QualityGate()
    assert gate.validate("gpu_samples", data).success
    mrows = args.rows / 1e6
    t_gate = _time(lambda: gate.validate("gpu_samples", data), args.repeat)
    raw = synthetic_gpu_samples(args.rows)
    t_conform = _time(lambda: conform(table, raw), args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "x.parquet"
        t_write = _time(lambda: pq.write_table(data, out, compression="zstd"), args.repeat)
        # Two staged files of one run whose times overlap: the commit-time scan across batches.
        halves = [Path(tmp) / "a.parquet", Path(tmp) / "b.parquet"]
        pq.write_table(data.slice(0, args.rows // 2), halves[0], compression="zstd")
        pq.write_table(data.slice(args.rows // 2), halves[1], compression="zstd")
        t_across = _time(lambda: gate.validate_across("gpu_samples", halves), args.repeat)
    bad = data.set_column(data.schema.get_field_index("gr_engine_active"), "gr_engine_active",
                          pa.array(np.where(np.arange(args.rows) == args.rows // 2, 1.7, data.column("gr_engine_active").to_numpy()).astype(np.float32)))
    t0 = time.perf_counter()
    report = gate.validate("gpu_samples", bad)
    t_first_fail = time.perf_counter() - t0
    t_fail = _time(lambda: gate.validate("gpu_samples", bad), args.repeat)
    print(f"rows per batch            {args.rows:,}")
    print(f"gate, clean batch         {t_gate:.3f} s  ({mrows / t_gate:.1f} M rows/s, {t_gate / mrows:.3f} s per M rows)")
    print(f"conform to schema         {t_conform:.3f} s  (for comparison)")
    print(f"write zstd Parquet        {t_write:.3f} s  (for comparison)")
    print(f"key scan across batches   {t_across:.3f} s  (DuckDB, only when a run's batches overlap in time)")
    print(f"gate, 1 bad row, 1st time {t_first_fail:.3f} s  (includes importing GX)")
    print(f"gate, 1 bad row, warm     {t_fail:.3f} s")
    print(f"message: {report.message}")


if __name__ == "__main__":
    main()
