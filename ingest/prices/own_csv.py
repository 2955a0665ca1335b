"""The project's own price CSV: the columns of the ``prices`` landing table, ISO-8601 times.

Required columns: ``provider, region, instance_type, capacity_type, usd_per_hour, effective_from``;
optional: ``gpu_usd_per_hour`` (price of one GPU), ``currency`` (default USD), ``effective_to``
(empty = open-ended), ``source`` (empty = ``csv:<file name>``). Any other column is an error, so
a misspelt header never silently drops a value. Negotiated or private prices go here.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from gpufinops.errors import InputError
from ingest.prices.base import CAPACITY_TYPES, PriceParser, PriceRecord, dedupe_records, parse_time, register_parser

__all__ = ["OwnCsvParser", "REQUIRED_COLUMNS", "OPTIONAL_COLUMNS"]

REQUIRED_COLUMNS = ("provider", "region", "instance_type", "capacity_type", "usd_per_hour", "effective_from")
OPTIONAL_COLUMNS = ("gpu_usd_per_hour", "currency", "effective_to", "source")


@register_parser
class OwnCsvParser(PriceParser):
    format = "csv"
    description = "gpufinops price CSV (the columns of the prices table)"

    def parse(self, path: Path | str, *, regions: Sequence[str] = ()) -> list[PriceRecord]:
        path = Path(path)
        wanted = set(regions)
        try:
            fh = path.open(newline="", encoding="utf-8-sig")
        except OSError as exc:
            raise InputError(f"{path}: cannot read the price file: {exc}") from exc
        out: list[PriceRecord] = []
        seen: dict[tuple, int] = {}
        with fh:
            reader = csv.DictReader(fh)
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in REQUIRED_COLUMNS if c not in header]
            unknown = [c for c in header if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
            if missing or unknown:
                raise InputError(f"{path}: header must hold the prices columns; missing {missing}, unknown {unknown}")
            reader.fieldnames = header
            for line, row in enumerate(reader, start=2):
                rec = _row(path, line, row)
                if wanted and rec.region not in wanted:
                    continue
                if rec.key in seen:
                    raise InputError(f"{path}: line {line} repeats the price of line {seen[rec.key]} "
                                     f"({rec.provider}/{rec.region}/{rec.instance_type}/{rec.capacity_type} "
                                     f"from {rec.effective_from.isoformat()})")
                seen[rec.key] = line
                out.append(rec)
        return dedupe_records(out, what=str(path))


def _row(path: Path, line: int, row: dict[str, str | None]) -> PriceRecord:
    def where(col: str) -> str:
        return f"{path}: line {line}, column {col}"

    def text(col: str) -> str:
        return (row.get(col) or "").strip()

    for col in ("provider", "region", "instance_type", "capacity_type"):
        if not text(col):
            raise InputError(f"{where(col)}: empty")
    capacity = text("capacity_type")
    if capacity not in CAPACITY_TYPES:
        raise InputError(f"{where('capacity_type')}: {capacity!r} is not one of {list(CAPACITY_TYPES)}")
    price = _number(text("usd_per_hour"), where("usd_per_hour"))
    if price is None or not price > 0 or price == float("inf"):  # NaN fails `> 0`
        raise InputError(f"{where('usd_per_hour')}: must be a price > 0 (and finite), got {text('usd_per_hour')!r}")
    gpu = _number(text("gpu_usd_per_hour"), where("gpu_usd_per_hour"))
    if gpu is not None and gpu < 0:
        raise InputError(f"{where('gpu_usd_per_hour')}: must be >= 0, got {gpu}")
    start = parse_time(text("effective_from"), where=where("effective_from"))
    if start is None:
        raise InputError(f"{where('effective_from')}: empty")
    end = parse_time(text("effective_to"), where=where("effective_to"))
    if end is not None and end <= start:
        raise InputError(f"{where('effective_to')}: {end.isoformat()} is not after effective_from {start.isoformat()}")
    return PriceRecord(text("provider").lower(), text("region"), text("instance_type"), capacity, price, gpu,
                       (text("currency") or "USD").upper(), start, end, text("source") or f"csv:{path.name}")


def _number(value: str, where: str) -> float | None:
    if value in ("", "NULL"):
        return None
    try:
        return float(value)
    except ValueError:
        raise InputError(f"{where}: {value!r} is not a number") from None
