"""Test data for the Prometheus ingest and a fixture serving it from a real, back-filled Prometheus.

A plain module (not a conftest): test modules import ``prometheus_server`` from here. The data is
small (about 10 k samples, promtool back-fills it in well under a second) and deterministic, and
:func:`expected_gpu_rows` / :func:`expected_usage` say what an ingest must land.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ingest.lake import partition_files
from testsupport.prometheus_server import Family, LocalPrometheus, backfill, write_openmetrics_blocks

T0 = datetime(2025, 3, 1, tzinfo=UTC)
STEP = 60
POINTS = 180  # three hours, so the data spans two of promtool's 2-hour blocks
END = T0 + timedelta(seconds=STEP * POINTS)

FIELDS = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_engine_active",
    "DCGM_FI_DEV_GPU_UTIL": "gpu_util",
    "DCGM_FI_DEV_FB_USED": "fb_used_mib",
    "DCGM_FI_DEV_FB_FREE": "fb_free_mib",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active",
}
_MIG_FIELDS = ("gr_engine_active", "fb_used_mib", "fb_free_mib", "tensor_active")  # no per-instance util/power


@dataclass(frozen=True)
class Device:
    labels: dict[str, str]
    identity: tuple  # (hostname, gpu, uuid, model_name, mig_profile, mig_instance, namespace, pod, container)
    fields: tuple[str, ...] = tuple(FIELDS.values())


_COMMON = {"job": "dcgm-exporter", "DCGM_FI_DRIVER_VERSION": "550.54.15"}
A100, H100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"

DEVICES: list[Device] = [
    # Old exporter generation: Hostname, pod_name / pod_namespace / container_name.
    Device({**_COMMON, "Hostname": "node-a", "gpu": "0", "UUID": "GPU-a0", "modelName": A100, "device": "nvidia0",
            "pod_name": "train-0", "pod_namespace": "ml", "container_name": "trainer"},
           ("node-a", 0, "GPU-a0", A100, None, None, "ml", "train-0", "trainer")),
    Device({**_COMMON, "Hostname": "node-a", "gpu": "1", "UUID": "GPU-a1", "modelName": A100, "device": "nvidia1"},
           ("node-a", 1, "GPU-a1", A100, None, None, None, None, None)),
    # New generation: hostname (a dotted FQDN: the split matchers must escape it), pod / namespace / container.
    Device({**_COMMON, "hostname": "node-b.gpu.internal", "gpu": "0", "UUID": "GPU-b0", "modelName": H100,
            "pod": "serve-1", "namespace": "infer", "container": "server"},
           ("node-b.gpu.internal", 0, "GPU-b0", H100, None, None, "infer", "serve-1", "server")),
    Device({**_COMMON, "hostname": "node-b.gpu.internal", "gpu": "1", "UUID": "GPU-b1", "modelName": H100,
            "pod": "serve-2", "namespace": "infer", "container": "server"},
           ("node-b.gpu.internal", 1, "GPU-b1", H100, None, None, "infer", "serve-2", "server")),
    # MIG instances (GPU_I_PROFILE / GPU_I_ID), two on gpu 0 and an unassigned one on gpu 1.
    Device({**_COMMON, "hostname": "node-c", "gpu": "0", "UUID": "GPU-c0", "modelName": A100,
            "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "7", "pod": "nb-1", "namespace": "notebooks", "container": "jupyter"},
           ("node-c", 0, "GPU-c0", A100, "1g.10gb", 7, "notebooks", "nb-1", "jupyter"), _MIG_FIELDS),
    Device({**_COMMON, "hostname": "node-c", "gpu": "0", "UUID": "GPU-c0", "modelName": A100,
            "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "8", "pod": "nb-2", "namespace": "notebooks", "container": "jupyter"},
           ("node-c", 0, "GPU-c0", A100, "1g.10gb", 8, "notebooks", "nb-2", "jupyter"), _MIG_FIELDS),
    Device({**_COMMON, "hostname": "node-c", "gpu": "1", "UUID": "GPU-c1", "modelName": A100,
            "GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "1"},
           ("node-c", 1, "GPU-c1", A100, "3g.40gb", 1, None, None, None), _MIG_FIELDS),
    # Scraped without honor_labels: the workload's labels became exported_*, pod is the exporter.
    Device({**_COMMON, "hostname": "node-d", "gpu": "0", "UUID": "GPU-d0", "modelName": H100,
            "pod": "nvidia-dcgm-exporter-x1", "namespace": "gpu-operator", "container": "nvidia-dcgm-exporter",
            "exported_pod": "batch-7", "exported_namespace": "batch", "exported_container": "worker"},
           ("node-d", 0, "GPU-d0", H100, None, None, "batch", "batch-7", "worker")),
    Device({**_COMMON, "hostname": "node-d", "gpu": "1", "UUID": "GPU-d1", "modelName": H100,
            "pod": "nvidia-dcgm-exporter-x1", "namespace": "gpu-operator", "container": "nvidia-dcgm-exporter"},
           ("node-d", 1, "GPU-d1", H100, None, None, None, None, None)),
]
# node-b gpu 1 changes hands halfway: serve-2 ends (its series stops) and serve-3 starts.
HANDOVER = 90
SUCCESSOR = Device({**DEVICES[3].labels, "pod": "serve-3"}, ("node-b.gpu.internal", 1, "GPU-b1", H100, None, None, "infer", "serve-3", "server"))
# A series no row can be made of (no gpu label): skipped and counted.
NO_GPU_LABELS = {**_COMMON, "hostname": "node-e", "UUID": "GPU-e0"}
NAN_AT = (2, "gpu_util", 10)  # (device index, field, point): the one NaN sample


def value(dev: int, field: str, k: int) -> float:
    if (dev, field, k) == NAN_AT:
        return math.nan
    base = {
        "gr_engine_active": ((k * 7 + dev * 13) % 100) / 100,
        "gpu_util": float((k * 3 + dev * 11) % 101),
        "fb_used_mib": 1000.0 + dev * 100 + k,
        "fb_free_mib": 80000.0 - dev * 100 - k,
        "power_w": 100.0 + (k % 50) + dev * 2.5,
        "tensor_active": ((k * 5 + dev) % 50) / 100,
    }
    return base[field]


# cAdvisor: (labels, cpu cores, memory bytes); the last two must be filtered out by the query.
CONTAINERS = [
    ({"namespace": "ml", "pod": "train-0", "container": "trainer", "id": "/kubepods/a"}, 3.5, 8.0e9),
    ({"namespace": "infer", "pod": "serve-1", "container": "server", "id": "/kubepods/b"}, 0.25, 2.5e9),
    ({"namespace": "infer", "pod": "serve-1", "container": "sidecar", "id": "/kubepods/c"}, 0.05, 1.0e8),
    ({"namespace": "legacy", "pod_name": "old-1", "container_name": "app", "id": "/kubepods/d"}, 1.0, 5.0e8),
    ({"namespace": "ml", "pod": "train-0", "container": "POD", "id": "/kubepods/a/pause"}, 0.001, 1.0e6),
    ({"namespace": "ml", "pod": "train-0", "container": "", "id": "/kubepods/a/"}, 3.6, 8.1e9),
]
USAGE_EXPECTED = {("ml", "train-0", "trainer"): (3.5, 8.0e9), ("infer", "serve-1", "server"): (0.25, 2.5e9),
                  ("infer", "serve-1", "sidecar"): (0.05, 1.0e8), ("legacy", "old-1", "app"): (1.0, 5.0e8)}


def _ts(k: int) -> float:
    return T0.timestamp() + STEP * k


def _device_points(d: int) -> list[tuple[Device, int]]:
    """(device labels in force, point) for device ``d``, with the handover of device 3."""
    if d != 3:
        return [(DEVICES[d], k) for k in range(POINTS)]
    return [(DEVICES[3] if k < HANDOVER else SUCCESSOR, k) for k in range(POINTS)]


def families() -> Iterator[Family]:
    for metric, field in FIELDS.items():
        samples: list[tuple[dict[str, str], float, float]] = []
        for d, dev in enumerate(DEVICES):
            if field in dev.fields:
                samples.extend((held.labels, _ts(k), value(d, field, k)) for held, k in _device_points(d))
        if field == "gpu_util":
            samples.extend((NO_GPU_LABELS, _ts(k), 1.0) for k in range(POINTS))
        yield Family(metric, samples)
    yield Family("container_cpu_usage_seconds_total",
                 [(lbl, _ts(k), cpu * STEP * k) for lbl, cpu, _ in CONTAINERS for k in range(POINTS)], type="counter")
    yield Family("container_memory_working_set_bytes",
                 [(lbl, _ts(k), mem) for lbl, _, mem in CONTAINERS for k in range(POINTS)])


def expected_gpu_rows(start: datetime = T0, end: datetime = END) -> dict[tuple, dict[str, float | None]]:
    """(identity..., ts) -> field values (None where absent or NaN) for points in ``[start, end)``."""
    out: dict[tuple, dict[str, float | None]] = {}
    for d, dev in enumerate(DEVICES):
        for held, k in _device_points(d):
            t = T0 + timedelta(seconds=STEP * k)
            if not start <= t < end:
                continue
            row: dict[str, float | None] = {}
            for field in FIELDS.values():
                v = value(d, field, k) if field in dev.fields else None
                row[field] = None if v is None or math.isnan(v) else v
            out[(*held.identity, t)] = row
    return out


def read_lake(lake: Path, table: str) -> pa.Table:
    files = partition_files(lake, table)
    if not files:
        return pa.table({})
    return pa.concat_tables([pq.read_table(f) for f in files])


@dataclass
class PromData:
    url: str
    samples: int


@pytest.fixture(scope="module", name="prometheus_server")
def prometheus_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromData]:
    base = tmp_path_factory.mktemp("prometheus")
    files, n = write_openmetrics_blocks(base / "openmetrics", families())
    assert len(files) == 2  # three hours from midnight: two 2-hour blocks, back-filled in parallel
    backfill(files, base / "tsdb")
    with LocalPrometheus(base / "tsdb") as prom:
        yield PromData(prom.url, n)
