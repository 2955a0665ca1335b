"""Land FOCUS bill files in the lake: one run per (billing period, provider, billing account,
sub-account).

The replacement rule: the lake slice of a bill is (cluster ``_billing``, source
``focus-<provider>-<period start YYYYMMDD>-<account key>``, window = the billing period), where
the account key is a short hash of (``BillingAccountId``, ``SubAccountId``) (:func:`slice_source`).
Ingesting a file again replaces its rows; a corrected file for the same billing period, provider,
billing account and sub-account replaces the old one whatever its name or hash, and the result
says which slice it replaced (:attr:`PeriodRun.replaced`); other periods, providers, accounts and
sub-accounts are untouched. So a re-export that no longer holds a sub-account leaves that
sub-account's old rows in place. A provider that exports one slice in several parts must be given
all the parts in one call (they land as one run).

Lakes written before the account was part of the key (slices ``focus-<provider>-<YYYYMMDD>``)
are split per account into the new slices when a writer first opens them
(:func:`ingest.lake.upgrade_layout` calls :func:`split_legacy_slice`).
A row whose charge period starts outside its billing period (a correction of an earlier period)
widens that run's window to cover it, with a warning.

Every file is read and typed before anything is written, so a bad row in any file writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gpufinops.errors import InputError
from ingest.focus.reader import FocusFile, read_focus_file
from ingest.lake import LakeWriter, encode_name, partition_files

__all__ = ["BILLING_CLUSTER", "PeriodRun", "ReplacedSlice", "FocusIngestResult", "provider_key", "expand_paths",
           "ingest_focus_files", "slice_source", "split_legacy_slice"]

log = logging.getLogger("gpufinops.ingest.focus")

BILLING_CLUSTER = "_billing"
_PROVIDERS = {
    "aws": "aws", "amazon web services": "aws", "amazon": "aws", "amazon web services, inc.": "aws",
    "gcp": "gcp", "google cloud": "gcp", "google": "gcp", "google cloud platform": "gcp",
    "azure": "azure", "microsoft": "azure", "microsoft azure": "azure",
}
_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")


def provider_key(name: str) -> str:
    """A short lower-case key for a ProviderName (``Amazon Web Services`` -> ``aws``)."""
    text = name.strip().lower()
    return _PROVIDERS.get(text) or re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"


_LEGACY_SOURCE = re.compile(r"^focus-(?P<prov>[a-z0-9-]+)-(?P<day>\d{8})$")


def slice_source(provider: str, period_start: datetime, account: str | None, sub_account: str | None) -> str:
    """The lake source of one bill slice: provider, billing period and a key of the two accounts."""
    key = hashlib.sha256(json.dumps([account, sub_account]).encode()).hexdigest()[:12]
    return f"focus-{provider}-{period_start:%Y%m%d}-{key}"


@dataclass
class ReplacedSlice:
    """What an ingest replaced: the rows of the same slice landed before, and where they came from."""

    rows: int
    files: list[str]  # the bill files (source_file) the old rows came from
    runs: list[str]


@dataclass
class PeriodRun:
    provider: str
    period_start: datetime
    period_end: datetime
    rows: int
    billed_cost: float
    effective_cost: float
    window_start: datetime
    window_end: datetime
    run_id: str = ""
    billing_account: str | None = None
    sub_account: str | None = None
    currency: str = "USD"
    replaced: ReplacedSlice | None = None

    @property
    def slice_label(self) -> str:
        sub = f", sub-account {self.sub_account}" if self.sub_account else ""
        return (f"{self.provider} {self.period_start:%Y-%m-%d}..{self.period_end:%Y-%m-%d} "
                f"account {self.billing_account or '(none)'}{sub}")


@dataclass
class FocusIngestResult:
    files: list[FocusFile] = field(default_factory=list)
    runs: list[PeriodRun] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.runs)


def expand_paths(paths: Sequence[Path | str]) -> list[Path]:
    """Files as given; a folder stands for the bill files in it (a multi-part export)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.lower().endswith(_SUFFIXES))
            if not found:
                raise InputError(f"{p}: folder holds no .csv, .csv.gz or .parquet bill files")
            out.extend(found)
        else:
            out.append(p)
    return out


_MONEY = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")


def to_usd(f: FocusFile, currency: Any) -> pa.Table:
    """The file's rows with every money column in USD. Money is never summed across currencies:
    a row in another currency is converted with ``currency.usd_rate`` (``Settings.currency``), its
    original currency and rate kept in ``extra_columns``; without a rate the file is refused."""
    t = f.table
    codes = pc.fill_null(pc.utf8_upper(pc.utf8_trim_whitespace(t["BillingCurrency"])), "USD")
    if pc.all(pc.equal(codes, "USD")).as_py():
        return t
    rates: dict[str, float] = {}
    for code in sorted(pc.unique(codes).to_pylist()):
        rate = currency.usd_rate(code) if currency is not None else None
        if rate is None:
            row = pc.index(codes, code).as_py()
            raise InputError(
                f"{f.path}: row {row + 1}, column BillingCurrency: {code!r} is not USD; money is kept in USD and "
                f"never summed across currencies: set `currency.rates.{code}` (USD per {code}) in the config file "
                "to convert it, or export the bill in USD")
        rates[code] = rate
    factor = pa.array([rates[c] for c in codes.to_pylist()], pa.float64())
    for name in _MONEY:
        t = t.set_column(t.schema.get_field_index(name), name, pc.multiply(t[name], factor))
    extras = []
    for code, extra in zip(codes.to_pylist(), t["extra_columns"].to_pylist(), strict=True):
        obj = json.loads(extra) if extra else {}
        if code != "USD":
            obj.update({"x_gpufinops_original_currency": code, "x_gpufinops_usd_rate": str(rates[code])})
        extras.append(json.dumps(obj, ensure_ascii=False, sort_keys=True) if obj else None)
    t = t.set_column(t.schema.get_field_index("extra_columns"), "extra_columns", pa.array(extras, pa.string()))
    return t.set_column(t.schema.get_field_index("BillingCurrency"), "BillingCurrency",
                        pa.array(["USD"] * t.num_rows, pa.string()))


def ingest_focus_files(lake_dir: Path | str, paths: Sequence[Path | str], *, version: str | None = None,
                       writer: LakeWriter | None = None, currency: Any = None) -> FocusIngestResult:
    """Read every file (nothing is written if any is bad), convert to USD, then one run per slice."""
    files = [read_focus_file(p, version=version) for p in expand_paths(paths)]
    for f in files:
        f.table = to_usd(f, currency)
    result = FocusIngestResult(files=files)
    if not files:
        return result
    table = pa.concat_tables([f.table for f in files])
    keys = pa.array([provider_key(v) for v in table.column("ProviderName").to_pylist()], pa.string())
    table = table.append_column("_provider", keys)
    group = ["_provider", "BillingPeriodStart", "BillingPeriodEnd", "BillingAccountId", "SubAccountId"]
    slices = table.group_by(group).aggregate([]).to_pylist()
    writer = writer or LakeWriter(lake_dir)
    plans = []
    for s in sorted(slices, key=lambda d: (d["_provider"], d["BillingPeriodStart"], str(d["BillingAccountId"]),
                                           str(d["SubAccountId"]))):
        prov, start, end = s["_provider"], s["BillingPeriodStart"], s["BillingPeriodEnd"]
        account, sub = s["BillingAccountId"], s["SubAccountId"]
        if end <= start:
            raise InputError(f"{files[0].path}: billing period {start.isoformat()} .. {end.isoformat()} of {prov} is empty or reversed")
        mask = pc.and_(pc.equal(table["_provider"], prov), pc.equal(table["BillingPeriodStart"], start))
        mask = pc.and_(mask, pc.equal(table["BillingPeriodEnd"], end))
        for col, value in (("BillingAccountId", account), ("SubAccountId", sub)):
            mask = pc.and_(mask, pc.is_null(table[col]) if value is None else pc.fill_null(pc.equal(table[col], value), False))
        part = table.filter(mask).drop_columns(["_provider"])
        charge = part.column("ChargePeriodStart")
        w_start = min(start, pc.min(charge).as_py())
        w_end = max(end, pc.max(charge).as_py() + timedelta(microseconds=1))
        if (w_start, w_end) != (start, end):
            log.warning("%s %s: some charges start outside the billing period; window widened to %s .. %s",
                        prov, start.date(), w_start.isoformat(), w_end.isoformat())
        plans.append((prov, start, end, account, sub, w_start, w_end, part))
    for prov, start, end, account, sub, w_start, w_end, part in plans:
        source = slice_source(prov, start, account, sub)
        replaced = _landed(writer.root, source, w_start, w_end)
        where = ", ".join(sorted({str(f.path) for f in files if f.path.name in set(part["source_file"].to_pylist())}))
        with writer.run(source, BILLING_CLUSTER, w_start, w_end) as lake_run:
            lake_run.add("billing_focus", part, where=where)
        record = lake_run.record
        assert record is not None
        currency = pc.unique(part["BillingCurrency"].drop_null()).to_pylist() or ["USD"]
        run = PeriodRun(prov, start, end, part.num_rows,
                        float(pc.sum(part["BilledCost"]).as_py() or 0.0),
                        float(pc.sum(part["EffectiveCost"]).as_py() or 0.0),
                        w_start, w_end, record.run_id, account, sub, currency[0], replaced)
        if replaced is not None:
            log.warning("%s: replaced slice %s (%d rows from %s, run %s)", ", ".join(str(f.path) for f in files),
                        run.slice_label, replaced.rows, ", ".join(replaced.files), ", ".join(replaced.runs))
        result.runs.append(run)
    return result


def _landed(root: Path, source: str, start: datetime, end: datetime) -> ReplacedSlice | None:
    """The rows of ``source`` already in the lake whose window overlaps ``[start, end)``."""
    from ingest.lake import _FILE_RE, _parse_stamp

    rows, files, runs = 0, set[str](), set[str]()
    me = encode_name(source)
    for path in partition_files(root, "billing_focus", cluster=BILLING_CLUSTER):
        m = _FILE_RE.match(path.name)
        if not m or m["source"] != me or _parse_stamp(m["end"]) <= start or end <= _parse_stamp(m["start"]):
            continue
        t = pq.read_table(path, columns=["source_file", "ingest_run_id"])
        rows += t.num_rows
        files.update(v for v in pc.unique(t["source_file"]).to_pylist() if v)
        runs.update(pc.unique(t["ingest_run_id"]).to_pylist())
    return ReplacedSlice(rows, sorted(files), sorted(runs)) if rows else None


def split_legacy_slice(path: Path, source: str) -> list[tuple[str, pa.Table]] | None:
    """A file of an old (provider, period) slice as (new source, rows) per account; None when
    ``source`` is already a slice of the new form."""
    m = _LEGACY_SOURCE.match(source)
    if not m:
        return None
    data = pq.read_table(path)
    start = datetime.strptime(m["day"], "%Y%m%d")
    out = []
    keys = data.select(["BillingAccountId", "SubAccountId"]).group_by(["BillingAccountId", "SubAccountId"]).aggregate([])
    for k in keys.to_pylist():
        mask = None
        for col in ("BillingAccountId", "SubAccountId"):
            value = k[col]
            part = pc.is_null(data[col]) if value is None else pc.fill_null(pc.equal(data[col], value), False)
            mask = part if mask is None else pc.and_(mask, part)
        out.append((slice_source(m["prov"], start, k["BillingAccountId"], k["SubAccountId"]), data.filter(mask)))
    return out
