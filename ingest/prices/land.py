"""Land a price file in the lake: parse it with its format's parser, then one run per provider.

Idempotence: the lake source of a run is ``prices-<format>-<provider>-<file name>``, its cluster
``_global`` and its window ``[min effective_from, max effective_to)`` (``2100-01-01`` when any row
is open-ended). Re-ingesting the same file replaces exactly its rows; a newer file of the same name
replaces the old rows that fall inside its window and keeps the older history before it.

Duplicate keys across files: a row whose key (provider, region, instance_type, capacity_type,
effective_from) is already in the lake from a *different* file is refused, naming both files;
nothing of the new file is written. (The warehouse would otherwise have to pick one of two prices
for the same hour.) Give the newer price its own ``effective_from``, or re-ingest the file that
holds the old one. ``gpufinops check`` reports duplicates already in a lake (``duplicate_prices``).

Currencies: money is kept in USD. A row in another currency is refused unless the settings give
its rate (``currency.rates``); it is then converted at ingest (``usd_per_hour`` and
``gpu_usd_per_hour`` times the rate, ``currency`` USD) and its ``source`` records the original
currency and the rate.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from gpufinops.errors import InputError
from ingest.lake import _FILE_RE, LakeWriter, encode_name, partition_files
from ingest.prices.base import PriceRecord, get_parser, records_to_table

__all__ = ["PRICES_CLUSTER", "OPEN_END", "ProviderRun", "PriceIngestResult", "parse_price_file", "ingest_price_file"]

log = logging.getLogger("gpufinops.ingest.prices")

PRICES_CLUSTER = "_global"
OPEN_END = datetime(2100, 1, 1, tzinfo=UTC)


@dataclass
class ProviderRun:
    provider: str
    rows: int
    window_start: datetime
    window_end: datetime
    run_id: str = ""


@dataclass
class PriceIngestResult:
    file: str
    format: str
    runs: list[ProviderRun] = field(default_factory=list)
    non_usd: list[PriceRecord] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.runs)


def parse_price_file(path: Path | str, fmt: str, *, regions: Sequence[str] = ()) -> list[PriceRecord]:
    """All price rows of a file (no lake access)."""
    return get_parser(fmt).parse(path, regions=regions)


def to_usd(records: list[PriceRecord], currency: Any, *, where: str) -> tuple[list[PriceRecord], list[PriceRecord]]:
    """Records in USD (converted with ``currency.usd_rate`` where needed), and the originals that
    were converted. A currency without a rate raises :class:`InputError` naming it."""
    out: list[PriceRecord] = []
    converted: list[PriceRecord] = []
    missing: dict[str, PriceRecord] = {}
    for rec in records:
        if rec.is_usd:
            out.append(rec)
            continue
        rate = currency.usd_rate(rec.currency) if currency is not None else None
        if rate is None:
            missing.setdefault(rec.currency.upper(), rec)
            continue
        converted.append(rec)
        gpu = None if rec.gpu_usd_per_hour is None else rec.gpu_usd_per_hour * rate
        out.append(replace(rec, usd_per_hour=rec.usd_per_hour * rate, gpu_usd_per_hour=gpu, currency="USD",
                           source=f"{rec.source} ({rec.currency.upper()} at {rate:g} USD)"))
    if missing:
        code, rec = sorted(missing.items())[0]
        n = sum(1 for r in records if r.currency.upper() in missing)
        raise InputError(
            f"{where}: {n} price row(s) are in {', '.join(sorted(missing))}, not USD (e.g. {rec.provider}/{rec.region}/"
            f"{rec.instance_type}/{rec.capacity_type} from {rec.effective_from:%Y-%m-%d}); money is kept in USD: "
            f"set `currency.rates.{code}` (USD per {code}) in the config file to convert, or give USD prices")
    return out, converted


def _same_keys_elsewhere(root: Path, source: str, records: list[PriceRecord]) -> tuple[PriceRecord, str] | None:
    """The first record whose key the lake already holds from another lake source, and that row's file."""
    keys = {r.key: r for r in records}
    me = encode_name(source)
    for path in partition_files(root, "prices", cluster=PRICES_CLUSTER):
        m = _FILE_RE.match(path.name)
        if m is None or m["source"] == me:
            continue
        t = pq.read_table(path, columns=["provider", "region", "instance_type", "capacity_type", "effective_from", "source"])
        for row in t.to_pylist():
            k = (row["provider"], row["region"], row["instance_type"], row["capacity_type"], row["effective_from"])
            if k in keys:
                return keys[k], f"{row['source']} ({path.relative_to(root)})"
    return None


def ingest_price_file(lake_dir: Path | str, path: Path | str, fmt: str, *, regions: Sequence[str] = (),
                      writer: LakeWriter | None = None, currency: Any = None) -> PriceIngestResult:
    """Parse ``path`` and write its rows, one lake run per provider; returns what was written.

    Rows in a currency other than USD are converted with ``currency`` (``Settings.currency``) and
    listed in ``non_usd``; without a rate for them the file is refused (nothing written).
    A key already landed from another file is refused, naming both files.
    """
    records = parse_price_file(path, fmt, regions=regions)
    records, converted = to_usd(records, currency, where=str(path))
    writer = writer or LakeWriter(lake_dir)
    name = str(path).rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    result = PriceIngestResult(file=str(path), format=fmt)
    by_provider: dict[str, list[PriceRecord]] = defaultdict(list)
    for rec in records:
        by_provider[rec.provider].append(rec)
    for provider, recs in sorted(by_provider.items()):
        clash = _same_keys_elsewhere(writer.root, f"prices-{fmt}-{provider}-{name}", recs)
        if clash is not None:
            rec, other = clash
            raise InputError(
                f"{path}: price key ({rec.provider}, {rec.region}, {rec.instance_type}, {rec.capacity_type}, "
                f"effective_from {rec.effective_from.isoformat()}) was already landed from {other}; two files may not "
                "price the same hour. Give the new price its own effective_from, or re-ingest the file that holds it")
    for provider, recs in sorted(by_provider.items()):
        start = min(r.effective_from for r in recs)
        ends = [r.effective_to for r in recs]
        end = OPEN_END if any(e is None for e in ends) else max(e for e in ends if e is not None)
        with writer.run(f"prices-{fmt}-{provider}-{name}", PRICES_CLUSTER, start, end) as lake_run:
            lake_run.add("prices", records_to_table(recs), where=str(path))
        record = lake_run.record
        assert record is not None
        result.runs.append(ProviderRun(provider, len(recs), start, end, record.run_id))
    result.non_usd = converted
    if converted:
        log.info("%s: %d price rows converted to USD with currency.rates", path, len(converted))
    return result
