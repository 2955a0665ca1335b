"""GCP Cloud Billing Catalog SKU list (Compute Engine ``skus[]``) to ``prices`` rows.

GCP prices a VM by component, so each SKU is read as one component price: the vCPU-hour or the
GiB-hour of a machine family (``A2 Instance Core running in Americas``, ``N1 Predefined Instance
Ram ...``) or the hour of one GPU (``Nvidia Tesla T4 GPU running in ...``), per region, usage type
and effective time. Instance prices are then composed for the shapes of
:mod:`ingest.prices.gcp_shapes` as ``vCPUs × core + GiB × ram + GPUs × gpu``; ``gpu_usd_per_hour``
is the price of one GPU, the only source where the GPU share is published.

Usage types: ``OnDemand`` -> on_demand, ``Preemptible`` (spot and preemptible VMs share these
SKUs) -> spot, ``Commit1Yr`` -> reserved (1-year committed-use rate); other commitments are skipped.
Several ``pricingInfo`` entries give successive prices: a composed price changes whenever one of
its components does, and each piece ends where the next begins.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from gpufinops.errors import InputError
from ingest.prices.base import PriceParser, PriceRecord, dedupe_records, parse_time, register_parser
from ingest.prices.gcp_shapes import GCE_SHAPES, MachineShape

__all__ = ["GcpCatalogParser", "classify_sku"]

log = logging.getLogger("gpufinops.ingest.prices")

_CAPACITY = {"OnDemand": "on_demand", "Preemptible": "spot", "Commit1Yr": "reserved"}
# Checked in order: the 80GB variants before the plain A100.
_GPU_NAMES = [
    ("a100 80gb", "nvidia-a100-80gb"),
    ("h100 80gb", "nvidia-h100-80gb"),
    ("h100", "nvidia-h100-80gb"),
    ("a100", "nvidia-tesla-a100"),
    ("v100", "nvidia-tesla-v100"),
    ("p100", "nvidia-tesla-p100"),
    ("t4", "nvidia-tesla-t4"),
    ("l4", "nvidia-l4"),
]
_FAMILY = re.compile(r"\b(n1 predefined|n2|a2|a3|g2)\b(?: instance)? (core|ram|cpu)\b")
_N1_COMMIT = re.compile(r"^commitment v\d: (cpu|ram) in\b")
_SKIP_WORDS = ("sole tenancy", "custom", "extended", "premium", "dws", "calendar", "reserved")


@dataclass(frozen=True)
class _Component:
    key: str  # family (n1, a2, ...) or GPU accelerator name
    part: str  # cpu | ram | gpu
    capacity: str


def classify_sku(sku: dict[str, Any]) -> _Component | None:
    """Which component price a SKU is, or None when it is not one we compose."""
    category = sku.get("category") or {}
    if category.get("resourceFamily") != "Compute":
        return None
    capacity = _CAPACITY.get(category.get("usageType", ""))
    desc = str(sku.get("description", "")).lower()
    if capacity is None or any(w in desc for w in _SKIP_WORDS):
        return None
    if " gpu" in desc and "nvidia" in desc:
        plain = desc.replace("tesla ", "")
        for needle, name in _GPU_NAMES:
            if needle in plain:
                return _Component(name, "gpu", capacity)
        return None
    m = _FAMILY.search(desc)
    if m:
        family = "n1" if m.group(1) == "n1 predefined" else m.group(1)
        return _Component(family, "ram" if m.group(2) == "ram" else "cpu", capacity)
    m = _N1_COMMIT.search(desc)  # N1 commitments name no family
    if m and capacity == "reserved":
        return _Component("n1", "ram" if m.group(1) == "ram" else "cpu", capacity)
    return None


_UNIT = {"cpu": "h", "gpu": "h", "ram": "GiBy.h"}
# (component, region) -> [(effective_from, price, currency)]
_Timeline = dict[tuple[_Component, str], list[tuple[datetime, float, str]]]


@register_parser
class GcpCatalogParser(PriceParser):
    format = "gcp"
    description = "GCP Cloud Billing Catalog SKU list (Compute Engine), composed per machine shape"

    def parse(self, path: Path | str, *, regions: Sequence[str] = ()) -> list[PriceRecord]:
        path = Path(path)
        skus = _load_skus(path)
        wanted = set(regions)
        timeline: _Timeline = {}
        for i, sku in enumerate(skus):
            comp = classify_sku(sku)
            if comp is None:
                continue
            where = f"{path}: skus[{i}] ({sku.get('skuId', '?')} {sku.get('description', '')!r})"
            prices = _price_steps(sku, comp, where)
            if not prices:
                continue
            for region in sku.get("serviceRegions") or []:
                if wanted and region not in wanted:
                    continue
                slot = (comp, region)
                if slot in timeline:
                    log.info("%s: a second SKU for %s in %s is ignored", where, comp, region)
                    continue
                timeline[slot] = prices
        return dedupe_records(self._compose(timeline, self.source_of(path), where=str(path)), what=str(path))

    def _compose(self, timeline: _Timeline, source: str, *, where: str) -> list[PriceRecord]:
        out: list[PriceRecord] = []
        regions_caps = {(region, comp.capacity) for comp, region in timeline}
        for region, capacity in sorted(regions_caps):
            for shape in GCE_SHAPES.values():
                parts = _parts_of(shape, capacity)
                steps = [timeline.get((comp, region)) for comp, _ in parts]
                if any(s is None for s in steps):
                    continue
                out.extend(_compose_shape(shape, region, capacity, parts, steps, source, where))  # type: ignore[arg-type]
        return out


def _parts_of(shape: MachineShape, capacity: str) -> list[tuple[_Component, float]]:
    parts = [(_Component(shape.family, "cpu", capacity), float(shape.vcpus)),
             (_Component(shape.family, "ram", capacity), float(shape.memory_gib))]
    if shape.gpu:
        parts.append((_Component(shape.gpu, "gpu", capacity), float(shape.gpus)))
    return parts


def _compose_shape(shape: MachineShape, region: str, capacity: str, parts: list[tuple[_Component, float]],
                   steps: list[list[tuple[datetime, float, str]]], source: str, where: str) -> list[PriceRecord]:
    breaks = sorted({t for s in steps for t, _, _ in s})
    out: list[PriceRecord] = []
    for n, at in enumerate(breaks):
        current = [_price_at(s, at) for s in steps]
        if any(c is None for c in current):
            continue  # some component has no price yet
        currencies = {c[1] for c in current if c is not None}
        if len(currencies) > 1:
            raise InputError(f"{where}: {shape.name} in {region} mixes currencies {sorted(currencies)}")
        total = sum(qty * c[0] for (_, qty), c in zip(parts, current, strict=True) if c is not None)
        gpu = current[2][0] if shape.gpu and current[2] is not None else None
        until = breaks[n + 1] if n + 1 < len(breaks) else None
        out.append(PriceRecord("gcp", region, shape.name, capacity, round(total, 9), None if gpu is None else round(gpu, 9),
                               currencies.pop(), at, until, source))
    return out


def _price_at(steps: list[tuple[datetime, float, str]], at: datetime) -> tuple[float, str] | None:
    found = None
    for t, price, currency in steps:
        if t <= at:
            found = (price, currency)
    return found


def _price_steps(sku: dict[str, Any], comp: _Component, where: str) -> list[tuple[datetime, float, str]]:
    steps = []
    for j, info in enumerate(sku.get("pricingInfo") or []):
        here = f"{where}.pricingInfo[{j}]"
        expr = info.get("pricingExpression") or {}
        unit = expr.get("usageUnit", "")
        if unit != _UNIT[comp.part]:
            log.info("%s: usage unit %r is not %r; skipped", here, unit, _UNIT[comp.part])
            continue
        effective = parse_time(info.get("effectiveTime"), where=f"{here}.effectiveTime")
        if effective is None:
            raise InputError(f"{here}: effectiveTime is missing")
        rate = _first_paid_rate(expr.get("tieredRates") or [], here)
        if rate is None:
            continue
        steps.append((effective, rate[0], rate[1]))
    return sorted(steps)


def _first_paid_rate(tiers: list[dict[str, Any]], where: str) -> tuple[float, str] | None:
    for tier in sorted(tiers, key=lambda t: float(t.get("startUsageAmount", 0) or 0)):
        unit_price = tier.get("unitPrice") or {}
        try:
            price = int(unit_price.get("units", 0) or 0) + int(unit_price.get("nanos", 0) or 0) / 1e9
        except (TypeError, ValueError):
            raise InputError(f"{where}: unitPrice {unit_price!r} is not units/nanos integers") from None
        if price > 0:
            return price, str(unit_price.get("currencyCode") or "USD")
    return None


def _load_skus(path: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the price file: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    skus = doc.get("skus") if isinstance(doc, dict) else None
    if not isinstance(skus, list):
        raise InputError(f"{path}: not a GCP Cloud Billing Catalog SKU list (no 'skus' array)")
    return skus
