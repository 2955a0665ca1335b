"""The shape every price-list parser produces, and the registry of parsers (one per ``--format``).

A parser turns one file (or one chain of pages) into :class:`PriceRecord` rows of the ``prices``
landing table. Parsers are pure: they read the file and return rows; landing them is
:mod:`ingest.prices.land`'s job.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from gpufinops.errors import InputError
from ingest.schema import get_table

__all__ = [
    "CAPACITY_TYPES",
    "PriceRecord",
    "PriceParser",
    "register_parser",
    "get_parser",
    "parser_formats",
    "records_to_table",
    "dedupe_records",
    "parse_time",
]

log = logging.getLogger("gpufinops.ingest.prices")

CAPACITY_TYPES = ("on_demand", "spot", "reserved")


@dataclass(frozen=True)
class PriceRecord:
    """One row of the ``prices`` landing table.

    ``usd_per_hour`` holds the price in ``currency``; the warehouse assumes USD, so a record in
    another currency is kept (nothing is silently converted) and flagged by :attr:`is_usd`.
    ``gpu_usd_per_hour`` is the price of *one* GPU of the instance when the source prices it
    separately (GCP), else None.
    """

    provider: str
    region: str
    instance_type: str
    capacity_type: str
    usd_per_hour: float
    gpu_usd_per_hour: float | None
    currency: str
    effective_from: datetime
    effective_to: datetime | None
    source: str

    @property
    def is_usd(self) -> bool:
        return self.currency.upper() == "USD"

    @property
    def key(self) -> tuple[str, str, str, str, datetime]:
        return (self.provider, self.region, self.instance_type, self.capacity_type, self.effective_from)


class PriceParser(ABC):
    """One price-list format. Subclasses set ``format`` and implement :meth:`parse`."""

    format: ClassVar[str]
    description: ClassVar[str] = ""

    @abstractmethod
    def parse(self, path: Path | str, *, regions: Sequence[str] = ()) -> list[PriceRecord]:
        """Read ``path`` into price rows; ``regions`` (when given) keeps only those regions."""

    def source_of(self, path: Path | str) -> str:
        """The ``source`` value of every row: the file name (or URL's last segment) and the format."""
        text = str(path)
        name = text.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0] if "://" in text else Path(text).name
        return f"{self.format}:{name or text}"


_REGISTRY: dict[str, type[PriceParser]] = {}


def register_parser(cls: type[PriceParser]) -> type[PriceParser]:
    """Class decorator: make ``cls`` available as ``--format cls.format``."""
    if cls.format in _REGISTRY and _REGISTRY[cls.format] is not cls:
        raise ValueError(f"price format {cls.format!r} registered twice")
    _REGISTRY[cls.format] = cls
    return cls


def get_parser(fmt: str) -> PriceParser:
    try:
        return _REGISTRY[fmt]()
    except KeyError:
        raise InputError(f"unknown price format {fmt!r}; known: {', '.join(parser_formats())}") from None


def parser_formats() -> list[str]:
    return sorted(_REGISTRY)


def parse_time(value: str | None, *, where: str) -> datetime | None:
    """ISO-8601 (``Z`` or an offset; a naive time is UTC) to an aware UTC datetime."""
    if value is None or str(value).strip() in ("", "NULL"):
        return None
    text = str(value).strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{where}: {value!r} is not an ISO-8601 time") from None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def dedupe_records(records: Iterable[PriceRecord], *, what: str) -> list[PriceRecord]:
    """Keep the first record per landing key (parsers yield their preferred candidate first)."""
    out: dict[tuple, PriceRecord] = {}
    dropped = 0
    for rec in records:
        if rec.key in out:
            dropped += 1
            continue
        out[rec.key] = rec
    if dropped:
        log.info("%s: %d duplicate price rows (same provider/region/type/capacity/effective_from) dropped", what, dropped)
    return sorted(out.values(), key=lambda r: (r.provider, r.region, r.instance_type, r.capacity_type, r.effective_from))


def records_to_table(records: Sequence[PriceRecord]) -> pa.Table:
    """Rows as an Arrow table with exactly the landing schema of ``prices``."""
    schema = get_table("prices").schema
    if not records:
        return schema.empty_table()
    return pa.Table.from_pylist([asdict(r) for r in records], schema=schema)
