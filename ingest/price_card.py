"""The dated price card (``seeds/price_card.csv``) as rows of the ``prices`` landing table.

Each instance type yields an ``on_demand`` row at its list price and a ``spot`` row at
``price × (1 − spot_discount)``. ``gpu_usd_per_hour`` is kept only where the card has a published
per-GPU price (GCP's attached GPUs); elsewhere the warehouse splits the node price by its weights.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from gpufinops.errors import InputError
from gpufinops.project import PROJECT_DIR

__all__ = [
    "PRICE_CARD_SOURCE",
    "PRICE_CARD_CLUSTER",
    "CardRow",
    "default_price_card_path",
    "read_price_card",
    "load_price_card",
    "write_price_card",
]

PRICE_CARD_SOURCE = "price_card"
PRICE_CARD_CLUSTER = "_global"
# The run window's end: far enough that every price of the card lies inside it.
_WINDOW_END = datetime(2100, 1, 1, tzinfo=UTC)
_REQUIRED = (
    "provider", "region", "instance_type", "gpu_model", "gpu_count", "gpu_memory_gib", "vcpu",
    "memory_gib", "on_demand_usd_per_hour", "spot_discount", "effective_from", "source",
)


@dataclass(frozen=True)
class CardRow:
    """One instance type of the card."""

    provider: str
    region: str
    instance_type: str
    gpu_model: str  # "" for CPU-only types
    gpu_count: int
    gpu_memory_gib: float
    vcpu: int
    memory_gib: float
    on_demand_usd_per_hour: float
    gpu_usd_per_hour: float | None
    spot_discount: float
    effective_from: datetime
    source: str


def default_price_card_path() -> Path:
    """``seeds/price_card.csv`` of the dbt project (the checkout's, or the installed copy)."""
    return PROJECT_DIR / "seeds" / "price_card.csv"


def read_price_card(path: Path | str) -> list[CardRow]:
    """Parse and check the card; a bad row raises :class:`InputError` naming file, row and column."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"price card {path} does not exist")
    rows: list[CardRow] = []
    seen: set[tuple[str, str, str, datetime]] = set()
    with path.open(newline="") as fh:
        reader = csv.DictReader(line for line in fh if not line.startswith("#"))
        missing = [c for c in _REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"price card {path}: missing column(s) {missing}")
        for lineno, raw in enumerate(reader, start=2):
            rows.append(_parse_row(path, lineno, raw))
            key = (rows[-1].provider, rows[-1].region, rows[-1].instance_type, rows[-1].effective_from)
            if key in seen:
                raise InputError(f"price card {path} row {lineno}: duplicate {key[:3]} at {key[3].date()}")
            seen.add(key)
    if not rows:
        raise InputError(f"price card {path} has no rows")
    return rows


def _parse_row(path: Path, lineno: int, raw: dict[str, str]) -> CardRow:
    def num(col: str, *, optional: bool = False) -> float | None:
        text = (raw.get(col) or "").strip()
        if not text and optional:
            return None
        try:
            return float(text)
        except ValueError:
            raise InputError(f"price card {path} row {lineno}: column {col!r} is not a number: {text!r}") from None

    price = num("on_demand_usd_per_hour")
    discount = num("spot_discount")
    assert price is not None and discount is not None
    if price <= 0:
        raise InputError(f"price card {path} row {lineno}: on_demand_usd_per_hour must be > 0, got {price}")
    if not 0 <= discount < 1:
        raise InputError(f"price card {path} row {lineno}: spot_discount must be in [0, 1), got {discount}")
    try:
        eff = datetime.fromisoformat(raw["effective_from"].strip())
    except ValueError:
        raise InputError(f"price card {path} row {lineno}: effective_from {raw['effective_from']!r} is not an ISO date") from None
    eff = eff.replace(tzinfo=UTC) if eff.tzinfo is None else eff.astimezone(UTC)
    for col in ("provider", "region", "instance_type", "source"):
        if not (raw.get(col) or "").strip():
            raise InputError(f"price card {path} row {lineno}: column {col!r} is empty")
    return CardRow(
        provider=raw["provider"].strip(),
        region=raw["region"].strip(),
        instance_type=raw["instance_type"].strip(),
        gpu_model=(raw.get("gpu_model") or "").strip(),
        gpu_count=int(num("gpu_count") or 0),
        gpu_memory_gib=float(num("gpu_memory_gib") or 0.0),
        vcpu=int(num("vcpu") or 0),
        memory_gib=float(num("memory_gib") or 0.0),
        on_demand_usd_per_hour=price,
        gpu_usd_per_hour=num("gpu_usd_per_hour", optional=True) if "gpu_usd_per_hour" in raw else None,
        spot_discount=discount,
        effective_from=eff,
        source=raw["source"].strip(),
    )


def load_price_card(path: Path | str) -> pa.Table:
    """The card as ``prices`` rows: one on-demand and one spot row per instance type."""
    out: list[dict] = []
    for r in read_price_card(path):
        for capacity_type, factor in (("on_demand", 1.0), ("spot", 1.0 - r.spot_discount)):
            out.append({
                "provider": r.provider,
                "region": r.region,
                "instance_type": r.instance_type,
                "capacity_type": capacity_type,
                "usd_per_hour": round(r.on_demand_usd_per_hour * factor, 6),
                "gpu_usd_per_hour": None if r.gpu_usd_per_hour is None else round(r.gpu_usd_per_hour * factor, 6),
                "currency": "USD",
                "effective_from": r.effective_from,
                "effective_to": None,
                "source": r.source,
            })
    from ingest.schema import TABLES

    return pa.Table.from_pylist(out, schema=TABLES["prices"].schema)


def write_price_card(writer, path: Path | str) -> int:  # writer: ingest.lake.LakeWriter
    """Land the card as one run (source ``price_card``, cluster ``_global``); returns rows written."""
    table = load_price_card(path)
    start = min(table.column("effective_from").to_pylist())
    with writer.run(PRICE_CARD_SOURCE, PRICE_CARD_CLUSTER, start, _WINDOW_END) as run:
        return run.add("prices", table, where=str(path))
