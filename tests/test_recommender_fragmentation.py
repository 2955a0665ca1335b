"""The FGD fragmentation measure against hand-worked nodes (DESIGN §3)."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.fragmentation import (
    TaskShape,
    device_free_fractions,
    fragmentation_report,
    node_fragmentation,
    task_distribution,
)

NAN = np.nan


def F(free: list[list[float]], cpu: list[float], models: list[str | None], shapes: list[TaskShape],
      probs: list[float]) -> np.ndarray:
    return node_fragmentation(np.array(free, float), np.array(cpu, float), models, shapes, probs)


def test_whole_gpus() -> None:
    # 8-GPU node with 3 idle GPUs. A 1-GPU task fits and strands nothing; a 4-GPU task cannot run,
    # so all 3 free GPUs are fragments for it. F = 0.5·0 + 0.5·3.
    free = [[1, 1, 1, 0, 0, 0, 0, 0]]
    shapes = [TaskShape(4, 1, 1.0), TaskShape(16, 4, 1.0)]
    assert F(free, [64], ["A100"], shapes, [0.5, 0.5])[0] == pytest.approx(1.5)


def test_shared_gpus() -> None:
    # Free 0.5 and 0.3. A 0.4 task runs on the 0.5 device; the 0.3 device is too small for it: F = 0.3.
    # A 0.6 task cannot run anywhere: F = 0.8. Mixed half/half: 0.55.
    free = [[0.5, 0.3]]
    assert F(free, [32], ["T4"], [TaskShape(1, 1, 0.4)], [1.0])[0] == pytest.approx(0.3)
    assert F(free, [32], ["T4"], [TaskShape(1, 1, 0.6)], [1.0])[0] == pytest.approx(0.8)
    assert F(free, [32], ["T4"], [TaskShape(1, 1, 0.4), TaskShape(1, 1, 0.6)], [0.5, 0.5])[0] == pytest.approx(0.55)


def test_cpu_starved_node() -> None:
    # Two idle GPUs but one free core: a 4-core GPU task cannot run, so both GPUs are fragments.
    assert F([[1, 1]], [1], ["V100"], [TaskShape(4, 1, 1.0)], [1.0])[0] == pytest.approx(2.0)
    assert F([[1, 1]], [8], ["V100"], [TaskShape(4, 1, 1.0)], [1.0])[0] == pytest.approx(0.0)


def test_model_constrained_task() -> None:
    shapes = [TaskShape(1, 1, 1.0, frozenset({"V100M16", "V100M32"}))]
    f = F([[1.0], [1.0]], [8, 8], ["T4", "V100M32"], shapes, [1.0])
    assert f.tolist() == pytest.approx([1.0, 0.0])


def test_task_without_gpu_counts_every_free_gpu_and_padding_is_ignored() -> None:
    f = F([[0.5, NAN], [1.0, 0.25]], [8, 8], ["A", "A"], [TaskShape(2, 0, 0.0)], [1.0])
    assert f.tolist() == pytest.approx([0.5, 1.25])


def test_cluster_rate_and_share() -> None:
    rep = fragmentation_report(np.array([[1, 1, 1, 0], [0.5, 0.3, 0, 0]], float), np.array([64, 64.0]), ["A", "A"],
                               8.0, [TaskShape(1, 2, 1.0)], [1.0])
    # node 0: a 2-GPU task runs, whole free GPUs strand nothing -> 0; node 1: cannot run -> 0.8.
    assert rep["fragmentation_gpus"] == pytest.approx(0.8)
    assert rep["free_gpus"] == pytest.approx(3.8)
    assert rep["fragmentation_rate"] == pytest.approx(0.8 / 3.8)
    assert rep["fragmentation_share_of_capacity"] == pytest.approx(0.1)


def test_task_distribution_truncates_at_95_percent() -> None:
    a, b, c = TaskShape(1, 1, 1.0), TaskShape(1, 1, 0.5), TaskShape(8, 8, 1.0)
    shapes, probs = task_distribution([a] * 90 + [b] * 6 + [c] * 4)
    assert shapes == [a, b] and probs == pytest.approx([90 / 96, 6 / 96])


def test_device_free_fractions_best_fit_descending() -> None:
    # Whole GPU on device 0; then 0.6 -> device 1, 0.5 -> device 2, 0.3 -> the fullest that fits (device 1).
    assert device_free_fractions(4, 1, [0.5, 0.3, 0.6]).tolist() == pytest.approx([0.0, 0.1, 0.5, 1.0])


def test_capacity_module_reads_the_warehouse_model_set() -> None:
    # gpufinops.capacity, the one formula: int_pod_specs.gpu_model_constraint's "A|B" form (a required
    # node-affinity In list) allows either model; another model or a node without one strands the
    # free GPUs, for a shared shape too; empty = any model
    from gpufinops.capacity import node_fragmentation as capacity_frag
    from gpufinops.capacity import parse_gpu_models

    assert parse_gpu_models("V100M32|V100M16") == frozenset({"V100M16", "V100M32"})
    assert parse_gpu_models("") is None and parse_gpu_models(None) is None
    shape = TaskShape(1, 1, 0.5, parse_gpu_models("V100M16|V100M32"))
    free = np.array([[0.6], [0.6], [0.6], [0.6]], float)
    f = capacity_frag(free, np.full(4, 8.0), ["V100M16", "V100M32", "T4", None], [shape], [1.0])
    assert f.tolist() == pytest.approx([0.0, 0.0, 0.6, 0.6])
    anyone = capacity_frag(free, np.full(4, 8.0), ["V100M16", "V100M32", "T4", None],
                           [TaskShape(1, 1, 0.5, parse_gpu_models(""))], [1.0])
    assert anyone.tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0])
