"""The PromQL-vs-warehouse bench at a tiny size: both sides must give the same answer."""

from __future__ import annotations

import json

from bench.promql_vs_warehouse import main


def test_promql_and_sql_agree_on_the_opencost_question(tmp_path):
    figs = main(gpus_a=16, hours_a=2, fields_a=2, gpus_b=16, days_b=1, out=tmp_path)
    by_stage = {s["stage"]: s for s in figs.stages}
    ingest = by_stage["a: DCGM ingest from Prometheus"]
    assert ingest["samples"] == 16 * 120 * 2  # every back-filled sample of both fields came back
    assert by_stage["b: largest relative difference PromQL vs SQL"]["value"] < 1e-4
    assert figs.answers and all(a["promql_allocated_gpu_h"] > 0 for a in figs.answers)
    total_alloc = sum(a["sql_allocated_gpu_h"] for a in figs.answers)
    assert 0 < total_alloc <= 16 * 24  # never more GPU-hours than the fleet has
    assert json.loads((tmp_path / "promql_vs_warehouse.json").read_text())["answers"] == figs.answers
