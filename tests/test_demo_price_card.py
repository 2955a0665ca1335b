"""The dated price card and its landing as ``prices`` rows."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from gpufinops.errors import InputError
from ingest.lake import LakeWriter, list_runs, partition_files
from ingest.price_card import default_price_card_path, load_price_card, read_price_card, write_price_card

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "demo"


def test_card_covers_three_providers_with_gpu_and_cpu_types() -> None:
    rows = read_price_card(default_price_card_path())
    assert {r.provider for r in rows} == {"aws", "gcp", "azure"}
    for provider in ("aws", "gcp", "azure"):
        mine = [r for r in rows if r.provider == provider]
        assert len({r.gpu_model for r in mine if r.gpu_count}) >= 5
        assert any(r.gpu_count == 0 for r in mine)
        assert all(r.source.startswith("https://") for r in mine)
    # a few published list prices the brief names, so a typo in the card is caught
    by_type = {r.instance_type: r.on_demand_usd_per_hour for r in rows}
    assert by_type["p4d.24xlarge"] == pytest.approx(32.7726)
    assert by_type["g4dn.12xlarge"] == pytest.approx(3.912)


def test_each_type_gets_on_demand_and_discounted_spot_rows() -> None:
    table = load_price_card(default_price_card_path())
    with default_price_card_path().open() as fh:
        card = list(csv.DictReader(fh))
    assert table.num_rows == 2 * len(card)
    rows = {(r["instance_type"], r["capacity_type"]): r for r in table.to_pylist()}
    for c in card:
        od = rows[(c["instance_type"], "on_demand")]
        spot = rows[(c["instance_type"], "spot")]
        assert od["usd_per_hour"] == pytest.approx(float(c["on_demand_usd_per_hour"]))
        assert spot["usd_per_hour"] == pytest.approx(float(c["on_demand_usd_per_hour"]) * (1 - float(c["spot_discount"])), rel=1e-6)
        assert od["currency"] == "USD" and od["effective_to"] is None
        assert od["effective_from"] == datetime.fromisoformat(c["effective_from"]).replace(tzinfo=UTC)
        assert (od["gpu_usd_per_hour"] is None) == (c["gpu_usd_per_hour"] == "")


def test_bad_row_names_file_row_and_column() -> None:
    with pytest.raises(InputError, match=r"bad_price_card\.csv row 3: column 'on_demand_usd_per_hour'"):
        load_price_card(FIXTURES / "bad_price_card.csv")


def test_written_as_one_global_run_and_rerun_replaces_it(tmp_path: Path) -> None:
    w = LakeWriter(tmp_path)
    n = write_price_card(w, default_price_card_path())
    write_price_card(w, default_price_card_path())
    files = [str(p) for p in partition_files(tmp_path, "prices", cluster="_global")]
    count = duckdb.sql(f"select count(*) from read_parquet({files!r}, hive_partitioning=false)").fetchall()[0][0]
    assert count == n
    runs = [r for r in list_runs(tmp_path) if r.source == "price_card"]
    assert len(runs) == 2 and {r.cluster for r in runs} == {"_global"}
    assert runs[0].window_end.startswith("2100-01-01")
