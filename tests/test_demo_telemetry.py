"""Scheduler and telemetry internals on a tiny in-memory cluster (no lake)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from ingest.demo.catalog import InstanceCatalog
from ingest.demo.fleet import build_fleet
from ingest.demo.scheduler import schedule
from ingest.demo.telemetry import ClusterTelemetry, GenAiSeries, expand_intervals, noise
from ingest.demo.workload import WorkloadOptions, make_pods
from ingest.price_card import default_price_card_path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
START = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
END = START + 86400

pytestmark = pytest.mark.skipif(not (DATA / "openb").is_dir(), reason="shared traces not present")


@pytest.fixture(scope="module")
def cluster():
    fleet = build_fleet(openb_dir=DATA / "openb", catalog=InstanceCatalog(default_price_card_path()),
                        clusters=2, nodes=12, window_start=START, window_end=END, seed=7)
    nodes = fleet.of("prod-aws")
    pods = make_pods(fleet, "prod-aws", DATA / "openb", WorkloadOptions(START, END, 7))
    layout, stats = schedule(nodes, pods, END)
    return nodes, pods, layout, stats


def test_expand_intervals_matches_a_loop() -> None:
    lo = np.array([0, 5, 3, 7])
    hi = np.array([3, 5, 6, 6])  # an empty and a reversed interval yield nothing
    rep, point = expand_intervals(lo, hi)
    expected = [(i, p) for i in range(4) for p in range(lo[i], hi[i])]
    assert list(zip(rep.tolist(), point.tolist(), strict=True)) == expected


def test_noise_is_deterministic_and_uniform() -> None:
    key = np.arange(200_000, dtype=np.uint64)
    a = noise(key, key * 3, 1)
    assert np.array_equal(a, noise(key, key * 3, 1))
    assert not np.array_equal(a, noise(key, key * 3, 2))
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.01


def test_genai_series_are_light_serving_load() -> None:
    g = GenAiSeries.load(DATA / "genai")
    assert len(g) > 50
    assert 0.03 < float(g.duty.mean()) < 0.12


def test_devices_and_mig_instances_are_never_oversubscribed(cluster) -> None:
    nodes, pods, layout, stats = cluster
    assert stats.placed > 0 and stats.waited > 0
    events: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for p in pods:
        if p.node < 0 or p.cls in ("cpu", "system"):
            continue
        assert p.sched >= p.created and p.deleted > p.sched
        kind = "mig" if p.cls == "mig" else "dev"
        share = 1000 if p.cls in ("whole", "mig") else p.milli
        for d in p.devices:
            events.setdefault((kind, d), []).extend([(p.sched, share), (p.deleted, -share)])
            if kind == "dev":
                assert layout.dev_node[d] == p.node
            else:
                assert layout.inst_node[d] == p.node
    assert events
    for key, ev in events.items():
        level = 0.0
        for _, delta in sorted(ev, key=lambda e: (e[0], e[1])):  # releases before claims at one instant
            level += delta
            assert level <= 1000 + 1e-9, key


def test_node_lifetimes_and_cordon_are_respected(cluster) -> None:
    nodes, pods, _, _ = cluster
    for p in pods:
        if p.node < 0:
            continue
        n = nodes[p.node]
        assert n.join_s <= p.sched and p.deleted <= n.leave_s
        if n.cordon and p.pin_node is None:
            assert not (n.cordon[0] <= p.sched < n.cordon[1])


def test_a_day_in_chunks_equals_the_day_at_once(cluster) -> None:
    nodes, pods, layout, _ = cluster
    tele = ClusterTelemetry(nodes, layout, pods, GenAiSeries.load(DATA / "genai"), 7)
    t0 = START + 3 * 3600
    whole = tele.gpu_samples(t0, t0 + 7200)
    parts = [tele.gpu_samples(t0, t0 + 3600), tele.gpu_samples(t0 + 3600, t0 + 7200)]
    import pyarrow as pa

    assert pa.concat_tables(parts).equals(whole)
    assert whole.num_rows > 0
    usage = tele.container_usage(t0, t0 + 7200)
    assert usage.num_rows > 0 and usage.column("cpu_cores").null_count == 0
