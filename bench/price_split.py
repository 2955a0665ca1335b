"""The GPU share of each GPU instance type's list price under both split methods, from the warehouse.

    python -m bench.price_split [--types p4d.24xlarge,p5.48xlarge,...]

Builds the price-card lake of tests/fixtures/warehouse/price_card_lake.py (one on-demand node per GPU
row of seeds/price_card.csv) twice in a temp folder, with ``cost.split_method`` residual and weights,
and prints a markdown table: price, GPU $/GPU-h and GPU share of the price under each method.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
from pathlib import Path

import duckdb

from gpufinops.settings import CostSettings, Settings
from transform import run_build

_FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "warehouse" / "price_card_lake.py"


def _card_lake():
    spec = importlib.util.spec_from_file_location("price_card_lake", _FIXTURE)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def shares(method: str, root: Path) -> dict[str, tuple]:
    settings = Settings(home=root / method, cost=CostSettings(split_method=method))
    _card_lake().write_price_card_lake(settings.lake_dir)
    os.environ["DBT_INDIRECT_SELECTION"] = "cautious"
    run_build(settings, full_refresh=True, select=["+int_node_costs_hourly"])
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    try:
        rows = con.execute(
            "select provider, instance_type, gpu_product, gpu_capacity, usd_per_hour, gpu_rate_usd, "
            "gpu_rate_usd * gpu_capacity / usd_per_hour, split_method from int_node_costs_hourly").fetchall()
    finally:
        con.close()
    return {r[1]: r for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        res, wts = shares("residual", Path(tmp)), shares("weights", Path(tmp))
    wanted = [t for t in args.types.split(",") if t] or sorted(res, key=lambda t: (res[t][0], t))
    print("| provider | instance type | GPUs | list $/h | residual $/GPU-h | GPU share (residual) | GPU share (weights) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for t in wanted:
        p, _, model, g, usd, rate, share, method = res[t]
        note = "" if method == "residual" else f" ({method})"
        print(f"| {p} | {t} | {g} × {model} | {usd:.4f} | {rate:.4f}{note} | {100 * share:.1f} % | {100 * wts[t][6]:.1f} % |")


if __name__ == "__main__":
    main()
