"""Landing price files: one idempotent lake run per (file, provider); unpriced node types; the CLI."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from cli.main import app
from gpufinops.settings import CurrencySettings
from ingest.lake import LakeWriter, list_runs, partition_files
from ingest.prices import OPEN_END, PRICES_CLUSTER, ingest_price_file, missing_instance_types

FIX = Path(__file__).parent / "fixtures" / "prices"


def _prices(lake: Path) -> list[tuple]:
    files = [str(p) for p in partition_files(lake, "prices")]
    if not files:
        return []
    return duckdb.connect().execute(
        "select provider, region, instance_type, capacity_type, usd_per_hour, currency, cluster "
        "from read_parquet(?, hive_partitioning=false) order by all", [files]).fetchall()


def test_one_run_per_provider_and_reingest_is_idempotent(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    rates = CurrencySettings(rates={"EUR": 1.1})
    res = ingest_price_file(lake, FIX / "own_prices.csv", "csv", currency=rates)
    assert [(r.provider, r.rows) for r in res.runs] == [("aws", 2), ("azure", 1), ("gcp", 1)]
    assert [r.currency for r in res.non_usd] == ["EUR"]  # converted with the rate, never landed as EUR
    aws = res.runs[0]
    # aws rows: one open-ended, so the window runs to the open end.
    assert aws.window_start == datetime(2026, 11, 1, tzinfo=UTC) and aws.window_end == OPEN_END
    first = _prices(lake)
    assert len(first) == 4 and {row[-1] for row in first} == {PRICES_CLUSTER}
    assert {row[5] for row in first} == {"USD"}
    assert [row[4] for row in first if row[0] == "azure"] == [pytest.approx(3.40 * 1.1)]
    ingest_price_file(lake, FIX / "own_prices.csv", "csv", currency=rates)
    assert _prices(lake) == first  # replaced, not duplicated
    runs = [r for r in list_runs(lake) if r.status == "committed"]
    assert len(runs) == 6 and {r.source for r in runs} == {
        "prices-csv-aws-own_prices.csv", "prices-csv-azure-own_prices.csv", "prices-csv-gcp-own_prices.csv"}


def test_sources_do_not_clobber_each_other(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest_price_file(lake, FIX / "aws_ec2_offer.json", "aws")
    ingest_price_file(lake, FIX / "azure_retail-1.json", "azure")
    ingest_price_file(lake, FIX / "gcp_compute_skus.json", "gcp", regions=["us-central1"])
    rows = _prices(lake)
    by_provider = {p: sum(1 for r in rows if r[0] == p) for p in ("aws", "azure", "gcp")}
    assert by_provider["aws"] == 5 and by_provider["azure"] == 7 and by_provider["gcp"] > 50
    assert all(r[1] == "us-central1" for r in rows if r[0] == "gcp")


def test_a_newer_file_replaces_the_overlapping_window(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    f = tmp_path / "card.csv"
    header = "provider,region,instance_type,capacity_type,usd_per_hour,effective_from,effective_to\n"
    f.write_text(header + "aws,us-east-1,p5.48xlarge,on_demand,98.32,2026-10-01,\n")
    ingest_price_file(lake, f, "csv")
    f.write_text(header + "aws,us-east-1,p5.48xlarge,on_demand,55.04,2026-11-01,\n")
    ingest_price_file(lake, f, "csv")
    got = duckdb.connect().execute(
        "select usd_per_hour, effective_from from read_parquet(?, hive_partitioning=false) order by effective_from",
        [[str(p) for p in partition_files(lake, "prices")]]).fetchall()
    # The October price stays as history; the November price is added once.
    assert [row[0] for row in got] == [98.32, 55.04]


def _nodes(lake: Path) -> None:
    rows = [
        {"snapshot_ts": datetime(2026, 11, 1, 10, tzinfo=UTC), "node": n, "provider": p, "region": r,
         "instance_type": t, "capacity_type": c, "provider_id": f"x://{n}"}
        for n, p, r, t, c in [
            ("n1", "aws", "us-east-1", "p4d.24xlarge", "on_demand"),
            ("n2", "aws", "us-east-1", "p4d.24xlarge", "spot"),
            ("n3", "aws", "us-east-1", "p5.48xlarge", "on_demand"),
            ("n4", "aws", "us-east-1", "p5.48xlarge", "on_demand"),
            ("n5", "azure", "eastus", "Standard_NC24ads_A100_v4", None),
        ]
    ]
    LakeWriter(lake).write("k8s_nodes", rows, source="test", cluster="c1",
                           window_start=datetime(2026, 11, 1, tzinfo=UTC), window_end=datetime(2026, 11, 2, tzinfo=UTC))


def test_missing_instance_types_lists_unpriced_node_shapes(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _nodes(lake)
    assert {m.name for m in missing_instance_types(lake)} == {  # no prices at all yet
        "aws/us-east-1/p4d.24xlarge/on_demand", "aws/us-east-1/p4d.24xlarge/spot",
        "aws/us-east-1/p5.48xlarge/on_demand", "azure/eastus/Standard_NC24ads_A100_v4/on_demand"}
    ingest_price_file(lake, FIX / "aws_ec2_offer.json", "aws")
    ingest_price_file(lake, FIX / "azure_retail-1.json", "azure")
    missing = missing_instance_types(lake)
    assert [(m.name, m.nodes) for m in missing] == [
        ("aws/us-east-1/p4d.24xlarge/spot", 1), ("aws/us-east-1/p5.48xlarge/on_demand", 2)]


def test_cli_ingests_and_checks_nodes(tmp_path: Path) -> None:
    _nodes(tmp_path / "lake")
    runner = CliRunner()
    res = runner.invoke(app, ["--home", str(tmp_path), "ingest", "prices", "--file", str(FIX / "aws_ec2_offer.csv"),
                              "--format", "aws", "--check-nodes", "--fail-on-missing"])
    assert res.exit_code == 1, res.output
    assert "aws/us-east-1/p5.48xlarge/on_demand" in res.output and "azure/eastus" in res.output
    assert "p4d.24xlarge/on_demand" not in res.output
    assert len(_prices(tmp_path / "lake")) == 5
    res = runner.invoke(app, ["--home", str(tmp_path), "ingest", "prices", "--file", str(FIX / "own_prices.csv"), "--format", "csv"])
    assert res.exit_code == 2 and "EUR" in res.output and "currency.rates.EUR" in res.output  # no rate: refused
    cfg = tmp_path / "rates.yaml"
    cfg.write_text("currency:\n  rates:\n    EUR: 1.1\n")
    res = runner.invoke(app, ["--home", str(tmp_path), "--config", str(cfg), "ingest", "prices", "--file",
                              str(FIX / "own_prices.csv"), "--format", "csv"])
    assert res.exit_code == 0 and "EUR" in res.output and "converted" in res.output
    res = runner.invoke(app, ["--home", str(tmp_path), "ingest", "prices", "--file", str(FIX / "own_prices.csv"), "--format", "xml"])
    assert res.exit_code == 2 and "unknown price format 'xml'" in res.output


@pytest.mark.parametrize("args", [["--file", "x.json"], []])
def test_cli_usage_errors(tmp_path: Path, args: list[str]) -> None:
    res = CliRunner().invoke(app, ["--home", str(tmp_path), "ingest", "prices", *args])
    assert res.exit_code == 2 and "error:" in res.output
