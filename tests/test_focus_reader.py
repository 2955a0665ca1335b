"""Reading FOCUS 1.0-1.3 bills: version detection, typing, NULLs, extras, tags, hashes, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from gpufinops.errors import InputError
from ingest.focus import MANDATORY, detect_version, read_focus_file
from ingest.focus.reader import file_sha256
from ingest.schema import get_table

FIX = Path(__file__).parent / "fixtures" / "focus"


@pytest.mark.parametrize(("name", "version", "rows", "provider"), [
    ("aws_focus_1.0.csv", "1.0", 7, "Amazon Web Services"),
    ("gcp_focus_1.2.csv", "1.2", 3, "Google Cloud"),
    ("azure_focus_1.3.csv", "1.3", 2, "Microsoft"),  # from ServiceProviderName
])
def test_versions_are_detected_and_rows_typed(name: str, version: str, rows: int, provider: str) -> None:
    f = read_focus_file(FIX / name)
    t = f.table
    assert (f.version, f.rows) == (version, rows)
    assert t.schema.equals(get_table("billing_focus").schema)
    assert set(t.column("ProviderName").to_pylist()) == {provider}
    assert set(t.column("focus_version").to_pylist()) == {version}
    assert set(t.column("source_file").to_pylist()) == {name}
    assert set(t.column("file_hash").to_pylist()) == {file_sha256(FIX / name)}
    assert len(set(t.column("row_hash").to_pylist())) == rows


def test_times_with_and_without_zone_become_utc() -> None:
    t = read_focus_file(FIX / "gcp_focus_1.2.csv").table
    starts = t.column("ChargePeriodStart").to_pylist()
    # "2026-11-01 00:00:00" (no zone: UTC) and "2026-11-02T01:00:00+01:00" (= 00:00 UTC).
    assert starts == [datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)]
    assert t.column("BillingPeriodEnd").to_pylist()[0] == datetime(2026, 12, 1, tzinfo=UTC)


def test_costs_are_floats_and_tags_are_maps() -> None:
    rows = read_focus_file(FIX / "aws_focus_1.0.csv").table.to_pylist()
    sp = rows[0]
    assert sp["BilledCost"] == pytest.approx(786.5424) and sp["EffectiveCost"] == pytest.approx(566.310528)
    assert dict(sp["Tags"]) == {"team": "ml-research", "kubernetes.io/cluster/prod-aws": "owned"}
    assert sp["ResourceId"] == "i-0a1b2c3d4e5f60001"
    ebs, nat, tax = rows[4], rows[5], rows[6]
    assert ebs["Tags"] == [] and nat["Tags"] is None  # "{}" is an empty map, an empty field is null
    assert tax["ChargeCategory"] == "Tax" and tax["ResourceId"] is None and tax["PricingQuantity"] is None
    assert json.loads(sp["extra_columns"]) == {"BillingAccountName": "acme-payer", "ListUnitPrice": "32.7726",
                                               "x_Operation": "RunInstances", "x_UsageType": "USE1-BoxUsage:p4d.24xlarge"}


def test_null_strings_and_extra_columns() -> None:
    a, b = read_focus_file(FIX / "nulls_extras.csv").table.to_pylist()
    assert a["ResourceName"] is None and a["CommitmentDiscountId"] is None and a["Tags"] is None and a["ContractedCost"] is None
    assert b["SkuPriceId"] is None and b["ConsumedQuantity"] is None
    assert json.loads(a["extra_columns"])["x_CostCenter"] == "cc-42" and json.loads(a["extra_columns"])["x_Custom"] is None
    assert json.loads(b["extra_columns"])["x_Custom"] == "spot-fleet-7" and json.loads(b["extra_columns"])["x_CostCenter"] is None


def test_missing_mandatory_columns_are_all_listed() -> None:
    with pytest.raises(InputError) as err:
        read_focus_file(FIX / "missing_mandatory.csv")
    msg = str(err.value)
    assert "missing_mandatory.csv" in msg and "FOCUS 1.0" in msg
    assert "BilledCost, ChargeClass, PublisherName" in msg


def test_declared_version_is_enforced() -> None:
    # A 1.0 file read as 1.3 lacks ServiceProviderName... but ProviderName is accepted in its place.
    assert read_focus_file(FIX / "aws_focus_1.0.csv", version="1.3").version == "1.3"
    with pytest.raises(InputError, match="ProviderName, PublisherName"):
        read_focus_file(FIX / "azure_focus_1.3.csv", version="1.2")
    with pytest.raises(InputError, match="FOCUS version '2.0'"):
        read_focus_file(FIX / "azure_focus_1.3.csv", version="2.0")


def test_detect_version_markers() -> None:
    base = list(MANDATORY["1.0"])
    assert detect_version(base) == "1.0"
    assert detect_version(base + ["SkuPriceDetails"]) == "1.1"
    assert detect_version(base + ["SkuPriceDetails", "InvoiceId"]) == "1.2"
    assert detect_version(list(MANDATORY["1.3"])) == "1.3"


def test_bad_tags_name_file_row_and_column() -> None:
    with pytest.raises(InputError, match=r"bad_tags\.csv: row 2, column Tags: not valid JSON"):
        read_focus_file(FIX / "bad_tags.csv")


def _edit(tmp_path: Path, src: str, row: int, column: str, value: str) -> Path:
    import csv

    with (FIX / src).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows[row - 1][column] = value
    out = tmp_path / src
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return out


@pytest.mark.parametrize(("column", "value", "message"), [
    ("BilledCost", "12,5", r"row 3, column BilledCost: '12,5' is not a number"),
    ("ChargePeriodStart", "01/11/2026", r"row 3, column ChargePeriodStart: '01/11/2026' is not an ISO-8601 time"),
    ("EffectiveCost", "NULL", r"row 3, column EffectiveCost: null"),
    ("Tags", '["team"]', r"row 3, column Tags: a JSON object is expected"),
])
def test_bad_values_name_row_and_column(tmp_path: Path, column: str, value: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_focus_file(_edit(tmp_path, "aws_focus_1.0.csv", 3, column, value))


def test_parquet_copy_reads_the_same_as_the_csv(tmp_path: Path) -> None:
    pq_path = tmp_path / "aws_focus_1.0.parquet"
    # DuckDB types the columns (timestamptz, double, bigint ids), as a provider's Parquet export would.
    duckdb.connect().execute(
        f"copy (select * from read_csv_auto('{FIX / 'aws_focus_1.0.csv'}')) to '{pq_path}' (format parquet)")
    csv_t = read_focus_file(FIX / "aws_focus_1.0.csv").table
    pq_t = read_focus_file(pq_path).table
    same = [c for c in csv_t.column_names if c not in ("source_file", "file_hash")]
    assert pq_t.select(same).equals(csv_t.select(same))
    assert pq_t.column("file_hash")[0].as_py() != csv_t.column("file_hash")[0].as_py()


def test_identical_lines_get_distinct_row_hashes(tmp_path: Path) -> None:
    text = (FIX / "aws_focus_1.0.csv").read_text().splitlines()
    dup = tmp_path / "dup.csv"
    dup.write_text("\n".join([text[0], text[1], text[1]]) + "\n")
    hashes = read_focus_file(dup).table.column("row_hash").to_pylist()
    assert hashes[1] == hashes[0] + "#2"


def test_gzipped_csv_and_typed_parquet_with_a_tags_map(tmp_path: Path) -> None:
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    gz = tmp_path / "aws_focus_1.0.csv.gz"
    gz.write_bytes(gzip.compress((FIX / "aws_focus_1.0.csv").read_bytes()))
    plain = read_focus_file(FIX / "aws_focus_1.0.csv").table
    assert read_focus_file(gz).table.column("row_hash").equals(plain.column("row_hash"))
    # A Parquet export with naive timestamps, a decimal cost and Tags as a real map.
    import csv

    with (FIX / "aws_focus_1.0.csv").open(newline="") as fh:
        raw = list(csv.DictReader(fh))
    t = pa.table({name: pa.array([r[name] for r in raw], pa.string())
                  for name in MANDATORY["1.0"] if name not in ("BilledCost", "ChargePeriodStart", "ChargePeriodEnd")})
    t = t.append_column("BilledCost", pa.array([round(v, 6) for v in plain.column("BilledCost").to_pylist()]).cast(pa.decimal128(18, 6)))
    naive = [v.replace(tzinfo=None) for v in plain.column("ChargePeriodStart").to_pylist()]
    t = t.append_column("ChargePeriodStart", pa.array(naive, pa.timestamp("ms")))
    t = t.append_column("ChargePeriodEnd", pa.array(naive, pa.timestamp("ms")))
    t = t.append_column("Tags", pa.array([[("team", "a"), ("env", "b")]] * t.num_rows, pa.map_(pa.string(), pa.string())))
    out = tmp_path / "typed.parquet"
    pq.write_table(t, out)
    got = read_focus_file(out).table
    assert got.column("ChargePeriodStart").to_pylist()[0] == datetime(2026, 11, 1, tzinfo=UTC)
    assert got.column("BilledCost").to_pylist() == pytest.approx(plain.column("BilledCost").to_pylist())
    assert dict(got.column("Tags").to_pylist()[0]) == {"team": "a", "env": "b"}
