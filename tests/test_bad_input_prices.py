"""Bad price lists: refused with the file, row or key named; the lake and app DB unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from badinput import PRICES, assert_refused, cli, snapshot

HEADER = "provider,region,instance_type,capacity_type,usd_per_hour,gpu_usd_per_hour,currency,effective_from,effective_to\n"
ROW = "aws,us-east-1,p5.48xlarge,on_demand,{price},,{cur},2026-11-01T00:00:00Z,\n"

CASES = [
    ("price-inf", ROW.format(price="inf", cur="USD"), ["card.csv: line 2, column usd_per_hour", "'inf'"]),
    ("price-1e300", ROW.format(price="1e300", cur="USD"), ["prices.usd_per_hour", "above 10000", "card.csv"]),
    ("price-nan", ROW.format(price="nan", cur="USD"), ["card.csv: line 2, column usd_per_hour", "'nan'"]),
    ("price-negative", ROW.format(price="-3", cur="USD"), ["card.csv: line 2, column usd_per_hour", "-3"]),
    ("price-zero", ROW.format(price="0", cur="USD"), ["card.csv: line 2, column usd_per_hour", "> 0"]),
    ("gpu-price-inf", "aws,us-east-1,p5.48xlarge,on_demand,3,inf,USD,2026-11-01T00:00:00Z,\n",
     ["prices.gpu_usd_per_hour", "inf", "card.csv"]),
    ("price-eur-without-rate", ROW.format(price="3.4", cur="EUR"), ["card.csv", "EUR", "currency.rates.EUR"]),
    ("bad-capacity-type", "aws,us-east-1,p5.48xlarge,preemptible,3,,USD,2026-11-01T00:00:00Z,\n",
     ["card.csv", "preemptible"]),
    ("end-before-start", "aws,us-east-1,p5.48xlarge,on_demand,3,,USD,2026-11-01T00:00:00Z,2026-10-01T00:00:00Z\n",
     ["card.csv", "effective_to"]),
    ("bad-time", "aws,us-east-1,p5.48xlarge,on_demand,3,,USD,first of november,\n", ["card.csv", "'first of november'"]),
    ("price-not-a-number", ROW.format(price="cheap", cur="USD"), ["card.csv", "cheap"]),
]


@pytest.mark.parametrize(("row", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_price_row_is_refused(bad_home: Path, tmp_path: Path, row: str, names: list[str]) -> None:
    card = tmp_path / "card.csv"
    card.write_text(HEADER + row)
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "prices", "--file", card, "--format", "csv")
    assert_refused(res, before, bad_home, *names)


def test_missing_column_is_named(bad_home: Path, tmp_path: Path) -> None:
    card = tmp_path / "card.csv"
    card.write_text("provider,region,instance_type\naws,us-east-1,p5.48xlarge\n")
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "prices", "--file", card, "--format", "csv")
    assert_refused(res, before, bad_home, "card.csv", "usd_per_hour")


def test_unknown_format_is_named(bad_home: Path) -> None:
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "prices", "--file", PRICES, "--format", "xml")
    assert_refused(res, before, bad_home, "unknown price format 'xml'")


def test_same_price_key_from_a_second_file_is_refused_naming_both(bad_home: Path, tmp_path: Path) -> None:
    """The base home holds the AWS offer file's p4d.24xlarge price; another file with the same
    key (provider, region, type, capacity, effective_from) is refused, naming both files."""
    import duckdb

    con = duckdb.connect()
    row = con.execute("select provider, region, instance_type, capacity_type, effective_from from read_parquet(?) limit 1",
                      [[str(p) for p in (bad_home / "lake" / "prices").rglob("*.parquet")]]).fetchone()
    assert row is not None
    card = tmp_path / "second.csv"
    card.write_text(HEADER + f"{row[0]},{row[1]},{row[2]},{row[3]},1.23,,USD,{row[4].isoformat()},\n")
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "prices", "--file", card, "--format", "csv")
    assert_refused(res, before, bad_home, "second.csv", "aws:aws_ec2_offer.csv", row[2], "already landed")


def test_eur_with_a_rate_is_converted_never_landed_as_eur(bad_home: Path, tmp_path: Path) -> None:
    card = tmp_path / "card.csv"
    card.write_text(HEADER + ROW.format(price="2", cur="EUR"))
    cfg = tmp_path / "rates.yaml"
    cfg.write_text("currency:\n  rates:\n    EUR: 1.25\n")
    res = cli(bad_home, "--config", cfg, "ingest", "prices", "--file", card, "--format", "csv")
    assert res.exit_code == 0, res.output
    import duckdb

    got = duckdb.connect().execute(
        "select usd_per_hour, currency, source from read_parquet(?) where instance_type = 'p5.48xlarge'",
        [[str(p) for p in (bad_home / "lake" / "prices").rglob("*.parquet")]]).fetchall()
    assert got == [(2.5, "USD", "csv:card.csv (EUR at 1.25 USD)")]
