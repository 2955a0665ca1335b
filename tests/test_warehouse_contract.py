"""Fast checks (no dbt run): the warehouse's reading of the landing schema, and the fragmentation
model's placement and task-shape rules."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ingest.rollups import ROLLUPS
from ingest.rollups import compute as rollup_compute
from ingest.schema import RUN_COLUMNS, TABLES

ROOT = Path(__file__).resolve().parents[1]


def _duckdb_type(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "timestamp with time zone"
    if pa.types.is_map(t):
        return f"map({_duckdb_type(t.key_type)}, {_duckdb_type(t.item_type)})"
    if pa.types.is_list(t):
        return f"{_duckdb_type(t.value_type)}[]"
    if pa.types.is_struct(t):
        return "struct(" + ", ".join(f"{f.name} {_duckdb_type(f.type)}" for f in t) + ")"
    return {
        pa.string(): "varchar", pa.int32(): "integer", pa.int64(): "bigint", pa.float32(): "float",
        pa.float64(): "double", pa.bool_(): "boolean",
    }[t]


def _macro_columns() -> dict[str, list[tuple[str, str]]]:
    """The (name, type) lists of macros/landing.sql's landing_columns, with its jinja shorthands expanded."""
    text = (ROOT / "macros" / "landing.sql").read_text()
    qty, smap = "map(varchar, double)", "map(varchar, varchar)"
    subst = {"qty": qty, "smap": smap, "ts": "timestamp with time zone",
             "ctr": f"struct(name varchar, requests {qty}, limits {qty})[]"}
    body = text[text.index("set tables = {"): text.index("} -%}", text.index("set tables = {"))]
    out: dict[str, list[tuple[str, str]]] = {}
    for m in re.finditer(r"'(\w+)': \[(.*?)\](?=,\s*\n\s*'|\s*,?\s*$)", body, re.S):
        cols = re.findall(r"\('(\w+)', ('[^']*'|\w+)\)", m.group(2))
        out[m.group(1)] = [(n, t.strip("'") if t.startswith("'") else subst[t]) for n, t in cols]
    for alias, same in re.findall(r"tables\.update\(\{'(\w+)': tables\['(\w+)'\]\}\)", text):
        out[alias] = out[same]  # a table landed with another's columns (the pod-snapshot rollup)
    return out


def test_landing_columns_macro_matches_ingest_schema():
    macro = _macro_columns()
    assert set(macro) == set(TABLES) | {r.table for rs in ROLLUPS.values() for r in rs}
    for name, table in TABLES.items():
        want = [(f.name, _duckdb_type(f.type)) for f in table.schema]
        assert macro[name] == want, name
    assert [f.name for f in RUN_COLUMNS] == ["cluster", "ingest_run_id", "ingested_at"]


def test_rollup_columns_macro_matches_the_rollup_sql():
    """The rollup tables' landing_columns are the types the rollup SQL writes (over an empty batch
    of each landing table), in order, then the run columns."""
    macro = _macro_columns()
    for source, r in ((s, r) for s, rs in ROLLUPS.items() for r in rs):
        empty = pa.Table.from_pylist([], schema=pa.schema(list(TABLES[source].schema) + RUN_COLUMNS))
        out = rollup_compute(r.table, empty)
        con = duckdb.connect()
        con.register("t", out)
        got = [(n, t.lower().replace('"', "")) for n, t, *_ in con.execute("describe select * from t").fetchall()]
        want = [(n, t.lower()) for n, t in macro[r.table]] + [("ingest_run_id", "varchar"),
                                                              ("ingested_at", "timestamp with time zone")]
        assert [g for g in got if g[0] != "cluster"] == want, r.table


def _capacity_model():
    path = ROOT / "models" / "marts" / "fct_cluster_capacity_hourly.py"
    spec = importlib.util.spec_from_file_location("fct_cluster_capacity_hourly", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_fractions_are_placed_best_fit_decreasing():
    cap = _capacity_model()
    free = np.array([1.0, 0.3, 1.0])
    cap.place_fractions(free, [0.25, 0.5, 0.25])  # the shared best-fit of recommender.fragmentation
    # 0.5 -> a full device (no partial one fits); 0.25 -> the 0.3 device (best fit); 0.25 -> the 0.5 left
    assert free.tolist() == pytest.approx([0.25, 0.05, 1.0])


def test_task_shapes_are_truncated_at_95_percent_and_renormalised():
    cap = _capacity_model()
    rows = [{"cluster": "c", "hour": 0, "gpu_equiv": 1.0, "cpu_request": 1.0}] * 19 + \
           [{"cluster": "c", "hour": 0, "gpu_equiv": 0.5, "cpu_request": 1.0}] * 1 + \
           [{"cluster": "c", "hour": 0, "gpu_equiv": 0.0, "cpu_request": 4.0}] * 5
    shapes = cap._shapes(pd.DataFrame(rows))
    # CPU-only pods are part of the target workload (the FGD authors' rule): 19/25 whole-GPU, then
    # 5/25 CPU-only reach 96 % >= 95 %; the 1/25 tail is cut and p renormalised over the 24 kept
    got = shapes[["k", "d", "p"]].values.tolist()
    assert [r[:2] for r in got] == [[1, 1.0], [0, 0.0]]
    assert [r[2] for r in got] == pytest.approx([19 / 24, 5 / 24])


def test_fragmentation_of_a_node_follows_the_definition():
    cap = _capacity_model()
    nodes = pd.DataFrame([{"cluster": "c", "hour": 0, "node": "n", "gpu_capacity": 4, "cpu_free": 2.0}])
    free = np.array([[0.0, 0.5, 1.0, 1.0]])
    shapes = pd.DataFrame([
        {"cluster": "c", "hour": 0, "cpu": 1.0, "k": 1, "d": 1.0, "p": 0.5},   # fits: only the 0.5 is stranded
        {"cluster": "c", "hour": 0, "cpu": 1.0, "k": 3, "d": 1.0, "p": 0.25},  # cannot run: all 2.5 stranded
        {"cluster": "c", "hour": 0, "cpu": 8.0, "k": 1, "d": 0.5, "p": 0.25},  # CPU short: all 2.5 stranded
    ])
    out = cap._fragmentation(nodes, free, shapes)
    assert out["fragmentation_gpus"].iloc[0] == pytest.approx(0.5 * 0.5 + 0.25 * 2.5 + 0.25 * 2.5)
    assert out["free_gpus"].iloc[0] == pytest.approx(2.5)


def test_a_model_constraint_strands_the_other_models_gpus():
    cap = _capacity_model()
    nodes = pd.DataFrame([
        {"cluster": "c", "hour": 0, "node": "a", "gpu_capacity": 2, "cpu_free": 8.0, "gpu_model": "A100"},
        {"cluster": "c", "hour": 0, "node": "t", "gpu_capacity": 2, "cpu_free": 8.0, "gpu_model": "T4"},
    ])
    free = np.array([[1.0, 1.0], [1.0, 0.5]])
    shapes = pd.DataFrame([{"cluster": "c", "hour": 0, "cpu": 1.0, "k": 1, "d": 1.0, "model": "A100", "p": 1.0}])
    out = cap._fragmentation(nodes, free, shapes)
    # the A100 node can host it (nothing stranded); every free GPU of the T4 node is stranded
    assert out["fragmentation_gpus"].iloc[0] == pytest.approx(1.5)
    # a `|` list (openb's V100M16|V100M32, a required node affinity In list) allows every model named
    shapes["model"] = "A100|T4"
    assert cap._fragmentation(nodes, free, shapes)["fragmentation_gpus"].iloc[0] == pytest.approx(0.5)


def test_a_cpu_only_task_strands_every_free_gpu():
    cap = _capacity_model()
    nodes = pd.DataFrame([{"cluster": "c", "hour": 0, "node": "n", "gpu_capacity": 2, "cpu_free": 8.0}])
    shapes = pd.DataFrame([{"cluster": "c", "hour": 0, "cpu": 1.0, "k": 0, "d": 0.0, "p": 1.0}])
    out = cap._fragmentation(nodes, np.array([[1.0, 0.25]]), shapes)
    assert out["fragmentation_gpus"].iloc[0] == pytest.approx(1.25)


def test_free_matrix_takes_whole_devices_then_places_the_fractions():
    cap = _capacity_model()
    nodes = pd.DataFrame([
        {"cluster": "c", "hour": 0, "node": "a", "gpu_capacity": 4, "whole_pod_gpus": 1.0},
        {"cluster": "c", "hour": 0, "node": "b", "gpu_capacity": 2, "whole_pod_gpus": 0.0},
    ])
    split = pd.DataFrame([
        {"cluster": "c", "hour": 0, "node": "a", "gpu_equiv": 1.5},   # a time-sliced 1.5: 1 device + 0.5
        {"cluster": "c", "hour": 0, "node": "a", "gpu_equiv": 0.25},
        {"cluster": "c", "hour": 0, "node": "gone", "gpu_equiv": 0.5},  # its node is not in the snapshot
    ])
    free = cap._free_matrix(nodes, split)
    # a: whole 1 + 1 -> devices 0 and 1; 0.5 onto device 2, then 0.25 best-fit onto the same device
    assert free[0].tolist() == pytest.approx([0.0, 0.0, 0.25, 1.0])
    assert free[1, :2].tolist() == [1.0, 1.0] and np.isnan(free[1, 2:]).all()


def test_task_shapes_from_counted_rows_equal_those_from_pod_rows():
    cap = _capacity_model()
    pods = pd.DataFrame([{"cluster": "c", "hour": 0, "gpu_equiv": 1.0, "cpu_request": 1.0}] * 3
                        + [{"cluster": "c", "hour": 0, "gpu_equiv": 0.3333, "cpu_request": 2.0}] * 2
                        + [{"cluster": "c", "hour": 0, "gpu_equiv": 0.33334, "cpu_request": 2.0}])
    counted = pods.groupby(["cluster", "hour", "gpu_equiv", "cpu_request"]).size().rename("n").reset_index()
    a, b = cap._shapes(pods), cap._shapes(counted)
    assert a.reset_index(drop=True).equals(b.reset_index(drop=True))
    assert a["p"].tolist() == pytest.approx([0.5, 0.5])  # 0.3333 and 0.33334 are one shape (d to 4 places)


def test_lower_bound_per_pool_from_node_rows():
    cap = _capacity_model()
    nodes = pd.DataFrame([
        {"cluster": "c", "hour": 0, "node_pool": "p", "gpu_capacity": 8, "cpu_allocatable": 64.0,
         "memory_allocatable_gib": 512.0, "gpu_requested": 6.0, "cpu_requested": 10.0,
         "memory_requested_gib": 100.0, "workload_pods": 2},
        {"cluster": "c", "hour": 0, "node_pool": "p", "gpu_capacity": 8, "cpu_allocatable": 64.0,
         "memory_allocatable_gib": 512.0, "gpu_requested": 3.0, "cpu_requested": 1.0,
         "memory_requested_gib": 1.0, "workload_pods": 1},
        {"cluster": "c", "hour": 0, "node_pool": "q", "gpu_capacity": 0, "cpu_allocatable": 16.0,
         "memory_allocatable_gib": 64.0, "gpu_requested": 0.0, "cpu_requested": 0.5,
         "memory_requested_gib": 0.5, "workload_pods": 0},  # system pods only: not in use
    ])
    out = cap._lower_bound(nodes)
    # pool p: ceil(9 / 8) = 2 nodes; pool q: ceil(0.5 / 16) = 1 (its system pods need a node)
    assert out[["nodes_in_use", "nodes_lower_bound"]].values.tolist() == [[2, 3]]
