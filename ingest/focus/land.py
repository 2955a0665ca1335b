"""Land FOCUS bill files in the lake: one run per (billing period, provider).

The replacement rule: the lake slice of a bill is (cluster ``_billing``, source
``focus-<provider>-<period start YYYYMMDD>``, window = the billing period). Ingesting a file again
replaces its rows; a corrected file for the same billing period and provider replaces the old one
whatever its name or hash; other periods and providers are untouched. A provider that exports one
period in several parts must be given all the parts in one call (they land as one run).
A row whose charge period starts outside its billing period (a correction of an earlier period)
widens that run's window to cover it, with a warning.

Every file is read and typed before anything is written, so a bad row in any file writes nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from gpufinops.errors import InputError
from ingest.focus.reader import FocusFile, read_focus_file
from ingest.lake import LakeWriter

__all__ = ["BILLING_CLUSTER", "PeriodRun", "FocusIngestResult", "provider_key", "expand_paths", "ingest_focus_files"]

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


def ingest_focus_files(lake_dir: Path | str, paths: Sequence[Path | str], *, version: str | None = None,
                       writer: LakeWriter | None = None) -> FocusIngestResult:
    files = [read_focus_file(p, version=version) for p in expand_paths(paths)]
    result = FocusIngestResult(files=files)
    if not files:
        return result
    table = pa.concat_tables([f.table for f in files])
    keys = pa.array([provider_key(v) for v in table.column("ProviderName").to_pylist()], pa.string())
    table = table.append_column("_provider", keys)
    slices = table.group_by(["_provider", "BillingPeriodStart", "BillingPeriodEnd"]).aggregate([]).to_pylist()
    writer = writer or LakeWriter(lake_dir)
    plans = []
    for s in sorted(slices, key=lambda d: (d["_provider"], d["BillingPeriodStart"])):
        prov, start, end = s["_provider"], s["BillingPeriodStart"], s["BillingPeriodEnd"]
        if end <= start:
            raise InputError(f"{files[0].path}: billing period {start.isoformat()} .. {end.isoformat()} of {prov} is empty or reversed")
        mask = pc.and_(pc.and_(pc.equal(table["_provider"], prov), pc.equal(table["BillingPeriodStart"], start)),
                       pc.equal(table["BillingPeriodEnd"], end))
        part = table.filter(mask).drop_columns(["_provider"])
        charge = part.column("ChargePeriodStart")
        w_start = min(start, pc.min(charge).as_py())
        w_end = max(end, pc.max(charge).as_py() + timedelta(microseconds=1))
        if (w_start, w_end) != (start, end):
            log.warning("%s %s: some charges start outside the billing period; window widened to %s .. %s",
                        prov, start.date(), w_start.isoformat(), w_end.isoformat())
        plans.append((prov, start, end, w_start, w_end, part))
    for prov, start, end, w_start, w_end, part in plans:
        record = writer.write("billing_focus", part, source=f"focus-{prov}-{start:%Y%m%d}", cluster=BILLING_CLUSTER,
                              window_start=w_start, window_end=w_end)
        result.runs.append(PeriodRun(prov, start, end, part.num_rows,
                                     float(pc.sum(part["BilledCost"]).as_py() or 0.0),
                                     float(pc.sum(part["EffectiveCost"]).as_py() or 0.0),
                                     w_start, w_end, record.run_id))
    return result
