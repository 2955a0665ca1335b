"""Bad FOCUS bills: refused with the file, row and column named; the lake and app DB unchanged.
Also the slice rule: a second billing account never replaces the first (defect 1)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from badinput import FIX, FOCUS, assert_refused, cli, snapshot

_ROWS = list(csv.DictReader(io.StringIO(FOCUS.read_text())))
_FIELDS = list(_ROWS[0])


def _bill(path: Path, change: dict[str, str] | None = None, row: int = 0, rows: list[dict[str, str]] | None = None) -> Path:
    data = [dict(r) for r in (rows or _ROWS)]
    data[row].update(change or {})
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, _FIELDS)
        w.writeheader()
        w.writerows(data)
    return path


CASES = [
    ("billed-nan", {"BilledCost": "NaN"}, ["bill.csv: row 1, column BilledCost", "nan", "finite"]),
    ("billed-infinity", {"BilledCost": "Infinity"}, ["bill.csv: row 1, column BilledCost", "inf", "finite"]),
    ("effective-minus-inf", {"EffectiveCost": "-inf"}, ["bill.csv: row 1, column EffectiveCost", "finite"]),
    ("billed-1e300", {"BilledCost": "1e300"}, ["billing_focus.BilledCost", "bill.csv"]),
    ("quantity-1e300", {"ConsumedQuantity": "1e300"}, ["billing_focus.ConsumedQuantity", "bill.csv"]),
    ("charge-category-gift", {"ChargeCategory": "Gift"}, ["billing_focus.ChargeCategory", "'Gift'", "bill.csv"]),
    ("billed-not-a-number", {"BilledCost": "a lot"}, ["bill.csv: row 1, column BilledCost", "'a lot'"]),
    ("billed-null", {"BilledCost": ""}, ["bill.csv: row 1, column BilledCost", "null"]),
    ("bad-charge-time", {"ChargePeriodStart": "soon"}, ["bill.csv: row 1, column ChargePeriodStart", "'soon'"]),
    ("charge-end-before-start", {"ChargePeriodEnd": "2026-10-01 00:00:00"}, ["billing_focus.ChargePeriodEnd", "bill.csv"]),
    ("tags-not-json", {"Tags": "{team: vision"}, ["bill.csv: row 1, column Tags", "not valid JSON"]),
    ("charge-in-1970", {"ChargePeriodStart": "1970-01-01 00:00:00", "ChargePeriodEnd": "1970-01-02 00:00:00"},
     ["billing_focus.ChargePeriodStart", "1970-01-01", "bill.csv"]),
    ("eur-without-rate", {"BillingCurrency": "EUR"}, ["bill.csv: row 1, column BillingCurrency", "'EUR'", "currency.rates.EUR"]),
]


@pytest.mark.parametrize(("change", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_bill_row_is_refused(bad_home: Path, tmp_path: Path, change: dict[str, str], names: list[str]) -> None:
    bill = _bill(tmp_path / "bill.csv", change)
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "billing", "--focus", bill)
    assert_refused(res, before, bad_home, *names)


SHAPE_CASES = [
    ("blank-first-line", "\n" + FOCUS.read_text(), ["bill.csv", "line 1 is blank", "line 2"]),
    ("json-file", '{"BilledCost": 1, "ProviderName": "x"}', ["bill.csv", "this is JSON"]),
    ("empty-file", "", ["bill.csv", "empty file"]),
    ("duplicate-header", "BilledCost,BilledCost\n1,2\n", ["bill.csv", "BilledCost", "more than once"]),
    ("missing-mandatory", (FIX / "focus" / "missing_mandatory.csv").read_text(), ["bill.csv", "mandatory column(s) missing"]),
]


@pytest.mark.parametrize(("text", "names"), [c[1:] for c in SHAPE_CASES], ids=[c[0] for c in SHAPE_CASES])
def test_bad_bill_file_is_refused(bad_home: Path, tmp_path: Path, text: str, names: list[str]) -> None:
    bill = tmp_path / "bill.csv"
    bill.write_text(text)
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "billing", "--focus", bill)
    assert_refused(res, before, bad_home, *names)


def test_mixed_currencies_are_never_summed(bad_home: Path, tmp_path: Path) -> None:
    """USD and EUR rows in one file: refused without a rate; with one, every row lands in USD."""
    bill = _bill(tmp_path / "bill.csv", {"BillingCurrency": "EUR", "BilledCost": "100", "EffectiveCost": "80"}, row=1)
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "billing", "--focus", bill)
    assert_refused(res, before, bad_home, "bill.csv: row 2, column BillingCurrency", "'EUR'")
    cfg = tmp_path / "rates.yaml"
    cfg.write_text("currency:\n  rates:\n    EUR: 1.5\n")
    res = cli(bad_home, "--config", cfg, "ingest", "billing", "--focus", bill)
    assert res.exit_code == 0, res.output
    import duckdb

    got = duckdb.connect().execute(
        "select distinct BillingCurrency from read_parquet(?)",
        [[str(p) for p in (bad_home / "lake" / "billing_focus").rglob("*.parquet")]]).fetchall()
    assert got == [("USD",)]
    eur = duckdb.connect().execute(
        "select BilledCost, EffectiveCost, extra_columns from read_parquet(?) where extra_columns like '%original_currency%'",
        [[str(p) for p in (bad_home / "lake" / "billing_focus").rglob("*.parquet")]]).fetchall()
    assert [(b, e) for b, e, _ in eur] == [(150.0, 120.0)] and '"EUR"' in eur[0][2]


def test_a_second_billing_account_does_not_replace_the_first(bad_home: Path, tmp_path: Path) -> None:
    """Defect 1: the slice key holds the billing account; a copy of the bill for another account
    lands beside the first, and re-landing a slice says which slice it replaced."""
    import duckdb

    other = [dict(r, BillingAccountId="02ZZZZ-999YYY-888XXX", ResourceId=r["ResourceId"] + "-b") for r in _ROWS]
    bill_b = _bill(tmp_path / "account-b.csv", rows=other)
    res = cli(bad_home, "ingest", "billing", "--focus", bill_b)
    assert res.exit_code == 0, res.output
    assert "replaced slice" not in res.output
    files = [str(p) for p in (bad_home / "lake" / "billing_focus").rglob("*.parquet")]
    accounts = duckdb.connect().execute(
        "select BillingAccountId, count(*) from read_parquet(?) group by 1 order by 1", [files]).fetchall()
    assert accounts == [("01ABCD-234EFG-567HIJ", len(_ROWS)), ("02ZZZZ-999YYY-888XXX", len(_ROWS))]
    res = cli(bad_home, "ingest", "billing", "--focus", bill_b)
    flat = " ".join(res.output.split())
    assert res.exit_code == 0 and "replaced slice gcp 2026-11-01..2026-12-01 account 02ZZZZ-999YYY-888XXX" in flat
    assert "account-b.csv" in flat
