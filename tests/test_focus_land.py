"""Landing FOCUS bills: one run per (billing period, provider), replace-on-reingest, nothing partial."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from cli.main import app
from gpufinops.errors import InputError
from ingest.focus import BILLING_CLUSTER, ingest_focus_files, provider_key
from ingest.lake import list_runs, partition_files

FIX = Path(__file__).parent / "fixtures" / "focus"


def _bill(lake: Path) -> list[tuple]:
    files = [str(p) for p in partition_files(lake, "billing_focus")]
    if not files:
        return []
    return duckdb.connect().execute(
        "select ProviderName, ResourceId, BilledCost, source_file, cluster from read_parquet(?, hive_partitioning=false) "
        "order by all", [files]).fetchall()


def test_provider_keys() -> None:
    assert [provider_key(p) for p in ("Amazon Web Services", "Google Cloud", "Microsoft", "Oracle Cloud")] == [
        "aws", "gcp", "azure", "oracle-cloud"]


def test_runs_per_period_and_provider_and_idempotent_reingest(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    res = ingest_focus_files(lake, [FIX / "aws_focus_1.0.csv", FIX / "gcp_focus_1.2.csv", FIX / "azure_focus_1.3.csv"])
    assert [(r.provider, r.rows) for r in res.runs] == [("aws", 7), ("azure", 2), ("gcp", 3)]
    aws = res.runs[0]
    assert (aws.window_start, aws.window_end) == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
    assert aws.billed_cost == pytest.approx(2 * 786.5424 + 2 * 48.12 + 1.333336 + 1.08 + 12.5)
    first = _bill(lake)
    assert len(first) == 12 and {r[-1] for r in first} == {BILLING_CLUSTER}
    ingest_focus_files(lake, [FIX / "aws_focus_1.0.csv"])
    assert _bill(lake) == first  # the same file again replaces its own slice
    sources = {r.source for r in list_runs(lake) if r.status == "committed"}
    # One slice per (provider, billing period, billing account, sub-account).
    assert {s.rsplit("-", 1)[0] for s in sources} == {"focus-aws-20261101", "focus-gcp-20261101", "focus-azure-20261101"}


def test_corrected_file_replaces_the_period_of_that_provider_only(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest_focus_files(lake, [FIX / "aws_focus_1.0.csv", FIX / "gcp_focus_1.2.csv"])
    corrected = tmp_path / "aws_focus_1.0_corrected.csv"
    lines = (FIX / "aws_focus_1.0.csv").read_text().splitlines()
    corrected.write_text("\n".join(lines[:3]).replace("786.5424,123456789012", "780.0000,123456789012") + "\n")
    ingest_focus_files(lake, [corrected])
    rows = _bill(lake)
    aws = [r for r in rows if r[0] == "Amazon Web Services"]
    assert len(aws) == 2 and {r[3] for r in aws} == {corrected.name}
    assert sorted(r[2] for r in aws) == [48.12, 780.0]
    assert sum(1 for r in rows if r[0] == "Google Cloud") == 3  # untouched


def test_a_multi_part_export_lands_as_one_run(tmp_path: Path) -> None:
    parts = tmp_path / "export"
    parts.mkdir()
    lines = (FIX / "aws_focus_1.0.csv").read_text().splitlines()
    (parts / "part-0.csv").write_text("\n".join(lines[:4]) + "\n")
    (parts / "part-1.csv").write_text("\n".join([lines[0]] + lines[4:]) + "\n")
    res = ingest_focus_files(tmp_path / "lake", [parts])
    assert [(r.provider, r.rows) for r in res.runs] == [("aws", 7)]
    assert {r[3] for r in _bill(tmp_path / "lake")} == {"part-0.csv", "part-1.csv"}


def test_a_charge_outside_its_billing_period_widens_the_window(tmp_path: Path) -> None:
    lines = (FIX / "aws_focus_1.0.csv").read_text().splitlines()
    late = tmp_path / "late.csv"
    # A correction of an October charge billed in November.
    late.write_text("\n".join([lines[0], lines[1].replace("2026-11-02T00:00:00Z,2026-11-01T00:00:00Z",
                                                          "2026-10-31T00:00:00Z,2026-10-30T00:00:00Z")]) + "\n")
    res = ingest_focus_files(tmp_path / "lake", [late])
    assert res.runs[0].window_start == datetime(2026, 10, 30, tzinfo=UTC)
    assert res.runs[0].period_start == datetime(2026, 11, 1, tzinfo=UTC)


def test_a_bad_file_writes_nothing(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    with pytest.raises(InputError, match="bad_tags.csv: row 2"):
        ingest_focus_files(lake, [FIX / "aws_focus_1.0.csv", FIX / "bad_tags.csv"])
    assert _bill(lake) == []


def test_cli_billing(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["--home", str(tmp_path), "ingest", "billing", "--focus", str(FIX / "azure_focus_1.3.csv"),
                              "--focus", str(FIX / "gcp_focus_1.2.csv")])
    assert res.exit_code == 0, res.output
    assert "FOCUS 1.3" in res.output and "FOCUS 1.2" in res.output
    assert len(_bill(tmp_path / "lake")) == 5
    folder = tmp_path / "bad"
    folder.mkdir()
    shutil.copy(FIX / "missing_mandatory.csv", folder)
    res = runner.invoke(app, ["--home", str(tmp_path), "ingest", "billing", "--focus", str(folder)])
    assert res.exit_code == 2 and "mandatory column(s) missing: BilledCost" in res.output
    res = runner.invoke(app, ["--home", str(tmp_path), "ingest", "billing"])
    assert res.exit_code == 2 and "--focus" in res.output
