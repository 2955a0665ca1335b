"""``gpufinops ingest all --once``: every configured source runs; one failure does not stop the rest."""

from __future__ import annotations

import socket
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from cli.main import app

FIX = Path(__file__).parent / "fixtures"


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_all_sources_run_and_failures_are_reported(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"""
home: {tmp_path / 'home'}
currency:
  rates:
    EUR: 1.1  # own_prices.csv has a EUR row: refused without a rate
sources:
  - kind: prices
    file: {FIX / 'prices' / 'own_prices.csv'}
    format: csv
  - kind: billing
    file: {FIX / 'focus' / 'aws_focus_1.0.csv'}
  - kind: dcgm
    cluster: prod
    prometheus_url: http://127.0.0.1:{_dead_port()}
"""
    )
    runner = CliRunner()
    result = runner.invoke(app, ["--config", str(cfg), "ingest", "all", "--once"])
    assert result.exit_code == 1, result.output  # the unreachable Prometheus fails ...
    assert "prices" in result.output and "billing" in result.output
    lake = tmp_path / "home" / "lake"
    # ... but the other two sources landed.
    prices = duckdb.sql(f"select count(*) from read_parquet('{lake}/prices/*/*/*.parquet', hive_partitioning=false)").fetchall()[0][0]
    bill = duckdb.sql(f"select count(*) from read_parquet('{lake}/billing_focus/*/*/*.parquet', hive_partitioning=false)").fetchall()[0][0]
    assert prices > 0 and bill > 0
    # A second pass is idempotent: the same rows, not twice as many.
    runner.invoke(app, ["--config", str(cfg), "ingest", "all", "--once"])
    again = duckdb.sql(f"select count(*) from read_parquet('{lake}/prices/*/*/*.parquet', hive_partitioning=false)").fetchall()[0][0]
    assert again == prices


def test_no_sources_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "ingest", "all", "--once"])
    assert result.exit_code == 2
    assert "no sources configured" in result.output
