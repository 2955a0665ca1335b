"""Land a price file in the lake: parse it with its format's parser, then one run per provider.

Idempotence: the lake source of a run is ``prices-<format>-<provider>-<file name>``, its cluster
``_global`` and its window ``[min effective_from, max effective_to)`` (``2100-01-01`` when any row
is open-ended). Re-ingesting the same file replaces exactly its rows; a newer file of the same name
replaces the old rows that fall inside its window and keeps the older history before it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ingest.lake import LakeWriter
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


def ingest_price_file(lake_dir: Path | str, path: Path | str, fmt: str, *, regions: Sequence[str] = (),
                      writer: LakeWriter | None = None) -> PriceIngestResult:
    """Parse ``path`` and write its rows, one lake run per provider; returns what was written.

    Rows in a currency other than USD are landed as they are (the warehouse reads ``usd_per_hour``
    as USD, so they are reported in ``non_usd`` for the caller to warn about, never converted).
    """
    records = parse_price_file(path, fmt, regions=regions)
    writer = writer or LakeWriter(lake_dir)
    name = str(path).rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    result = PriceIngestResult(file=str(path), format=fmt)
    by_provider: dict[str, list[PriceRecord]] = defaultdict(list)
    for rec in records:
        by_provider[rec.provider].append(rec)
    for provider, recs in sorted(by_provider.items()):
        start = min(r.effective_from for r in recs)
        ends = [r.effective_to for r in recs]
        end = OPEN_END if any(e is None for e in ends) else max(e for e in ends if e is not None)
        record = writer.write("prices", records_to_table(recs), source=f"prices-{fmt}-{provider}-{name}",
                              cluster=PRICES_CLUSTER, window_start=start, window_end=end)
        result.runs.append(ProviderRun(provider, len(recs), start, end, record.run_id))
    result.non_usd = [r for r in records if not r.is_usd]
    if result.non_usd:
        log.info("%s: %d price rows are not in USD (kept with their currency; the warehouse assumes USD)",
                    path, len(result.non_usd))
    return result
