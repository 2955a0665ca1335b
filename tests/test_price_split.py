"""The price split on the real price card (seeds/price_card.csv) through a dbt-built warehouse.

One on-demand node per GPU instance type of the card (tests/fixtures/warehouse/price_card_lake.py);
the build runs the models up to int_node_costs_hourly and dq_price_split with the default
`residual` split. GCP prices a GPU VM as vCPU + memory + a per-GPU SKU, so the residual of a GCP
list price must give back the published GPU SKU.
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import duckdb
import pytest

from gpufinops.settings import Settings

_FIXTURE = Path(__file__).parent / "fixtures" / "warehouse" / "price_card_lake.py"
_spec = importlib.util.spec_from_file_location("warehouse_price_card_lake", _FIXTURE)
card_lake = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(card_lake)

pytestmark = pytest.mark.timeout(600)
_SEEDS = Path(__file__).resolve().parent.parent / "seeds"

# GCP's published per-GPU SKUs, us-central1 on-demand, $/GPU-hour (https://cloud.google.com/compute/gpus-pricing).
# T4, V100 and P100 are also in the card's gpu_usd_per_hour column (so the price list wins); the A2
# (A100) and G2 (L4) machine types are priced whole on the card and must be split by the residual.
GCP_GPU_SKU = {
    "T4": 0.35,
    "V100-16GB": 2.48,
    "P100-16GB": 1.46,
    "A100-40GB": 2.933908,
    "A100-80GB": 3.92748,
    "L4": 0.56,
}
# A3 (H100) is sold as a bundle: its own vCPU / memory SKUs are not in seeds/reference_rates.csv, so
# it is split with the N1 rates and has no published per-GPU SKU to compare with.
GCP_NOT_COMPARED = {"H100-80GB"}


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    from transform import run_build

    settings = Settings(home=tmp_path_factory.mktemp("card"))
    rows = card_lake.write_price_card_lake(settings.lake_dir)
    with pytest.MonkeyPatch.context() as mp:
        # only the tests of the selected models (not the singular tests that also read the marts)
        mp.setenv("DBT_INDIRECT_SELECTION", "cautious")
        run_build(settings, full_refresh=True, select=["+int_node_costs_hourly", "+dq_price_split"])
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    try:
        cols = ("node, provider, instance_type, gpu_capacity, usd_per_hour, split_method, split_flag, gpu_rate_usd, "
                "node_cost_usd, node_gpu_cost_usd, node_cpu_cost_usd, node_memory_cost_usd")
        got = con.execute(f"select {cols} from int_node_costs_hourly").fetchall()
        dq = con.execute("select node, issue from dq_price_split").fetchall()
    finally:
        con.close()
    names = [c.strip() for c in cols.split(",")]
    by_node = {r[0]: dict(zip(names, r, strict=True)) for r in got}
    return rows, by_node, dq


def test_every_gpu_row_of_the_card_is_priced_and_split(card):
    rows, by_node, dq = card
    assert {card_lake.node_name(r.provider, r.instance_type) for r in rows} == set(by_node)
    for node, r in by_node.items():
        assert r["usd_per_hour"] > 0, node
        # conservation: the GPU, CPU and memory parts add up to the node's cost
        parts = r["node_gpu_cost_usd"] + r["node_cpu_cost_usd"] + r["node_memory_cost_usd"]
        assert parts == pytest.approx(r["node_cost_usd"], rel=1e-12, abs=1e-12), node
        assert r["split_method"] in ("residual", "gpu_price"), node
    # every GPU row of the card has reference rates and a GPU share above the floor: nothing fell back
    assert dq == []


def test_gcp_gpu_rate_equals_the_published_gpu_sku(card):
    rows, by_node, _ = card
    gcp = [r for r in rows if r.provider == "gcp"]
    assert {r.gpu_model for r in gcp} == set(GCP_GPU_SKU) | GCP_NOT_COMPARED
    compared = 0
    for r in gcp:
        if r.gpu_model in GCP_NOT_COMPARED:
            continue
        got = by_node[card_lake.node_name(r.provider, r.instance_type)]
        assert abs(got["gpu_rate_usd"] - GCP_GPU_SKU[r.gpu_model]) <= 0.001, (r.instance_type, got["gpu_rate_usd"])
        compared += 1
    assert compared >= 12


def _reference(provider):
    with (_SEEDS / "reference_rates.csv").open() as fh:
        row = next(r for r in csv.DictReader(fh) if r["provider"] == provider and r["machine_family"] == "*")
    return float(row["vcpu_usd_per_hour"]), float(row["gib_usd_per_hour"])


@pytest.mark.parametrize("provider,instance_type", [("aws", "p4d.24xlarge"), ("aws", "p5.48xlarge"),
                                                    ("azure", "Standard_ND96isr_H100_v5")])
def test_aws_and_azure_gpu_part_is_the_price_less_cpu_and_memory_at_reference_rates(card, provider, instance_type):
    rows, by_node, _ = card
    r = next(x for x in rows if x.provider == provider and x.instance_type == instance_type)
    got = by_node[card_lake.node_name(provider, instance_type)]
    r_cpu, r_mem = _reference(provider)
    expected_gpu_part = r.on_demand_usd_per_hour - r.vcpu * r_cpu - r.memory_gib * r_mem
    assert got["split_method"] == "residual"
    assert got["gpu_rate_usd"] * r.gpu_count == pytest.approx(expected_gpu_part, rel=1e-12)
    # the weights would give these GPUs well under half of the price; the provider's rates give most of it
    assert got["gpu_rate_usd"] * r.gpu_count / r.on_demand_usd_per_hour > 0.7
