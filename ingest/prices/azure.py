"""Azure Retail Prices API pages (``{"Items": [...], "NextPageLink": ...}``) to ``prices`` rows.

Kept: ``serviceName`` Virtual Machines, ``unitOfMeasure`` "1 Hour", ``productName`` without
"Windows", types ``Consumption`` and ``Reservation`` (``DevTestConsumption`` is skipped). A
Consumption item whose ``skuName`` says "Spot" or "Low Priority" is ``spot`` (Spot preferred when a
region has both), else ``on_demand``. A Reservation item's price is the whole term's price even
though its unit says "1 Hour"; it becomes ``reserved`` at price / (8,760 h × years), the 1-year
term preferred over the 3-year one.

Pages: the file given is page one; each ``NextPageLink`` is followed until it is null. A link
that names a file (relative to the page, or ``file://``) is read from disk; an ``http(s)`` link
met while reading files resolves to the next-numbered sibling file when the pages were saved as
``<name>-<n>.json`` / ``<name>_<n>.json``; when the start is itself a URL the links are fetched
with httpx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from gpufinops.errors import InputError, TransientError
from ingest.prices.base import PriceParser, PriceRecord, dedupe_records, parse_time, register_parser

__all__ = ["AzureRetailParser", "iter_pages"]

_HOURS_PER_YEAR = 8760.0
_NUMBERED = re.compile(r"^(?P<stem>.*?)(?P<sep>[-_])(?P<n>\d+)(?P<ext>\.json)$")
_MAX_PAGES = 100_000


@register_parser
class AzureRetailParser(PriceParser):
    format = "azure"
    description = "Azure Retail Prices API JSON pages (NextPageLink followed)"

    def parse(self, path: Path | str, *, regions: Sequence[str] = ()) -> list[PriceRecord]:
        wanted = set(regions)
        source = self.source_of(path)
        ranked: list[tuple[tuple[int, int], PriceRecord]] = []
        for where, items in iter_pages(path):
            for i, item in enumerate(items):
                here = f"{where}: Items[{i}]"
                rec_rank = _record(item, source, here)
                if rec_rank is None or (wanted and rec_rank[1].region not in wanted):
                    continue
                ranked.append(rec_rank)
        ranked.sort(key=lambda rr: rr[0])  # preferred candidates first; dedupe keeps the first
        return dedupe_records((rec for _, rec in ranked), what=source)


def _record(item: dict[str, Any], source: str, where: str) -> tuple[tuple[int, int], PriceRecord] | None:
    if item.get("serviceName") != "Virtual Machines" or item.get("unitOfMeasure") != "1 Hour":
        return None
    if "windows" in str(item.get("productName", "")).lower():
        return None
    kind = item.get("type")
    sku_name = str(item.get("skuName", ""))
    instance, region = item.get("armSkuName"), item.get("armRegionName")
    if not instance or not region:
        return None
    price_raw = item.get("retailPrice", item.get("unitPrice"))
    try:
        price = float(price_raw)  # type: ignore[arg-type]  # None is caught below
    except (TypeError, ValueError):
        raise InputError(f"{where}: retailPrice {price_raw!r} is not a number") from None
    if kind == "Consumption":
        if "spot" in sku_name.lower():
            capacity, rank = "spot", (0, 0)
        elif "low priority" in sku_name.lower():
            capacity, rank = "spot", (0, 1)
        else:
            capacity, rank = "on_demand", (0, 0)
    elif kind == "Reservation":
        years = _term_years(item.get("reservationTerm"), where)
        capacity, rank, price = "reserved", (0, int(years)), price / (years * _HOURS_PER_YEAR)
    else:
        return None
    if price <= 0:
        return None
    start = parse_time(item.get("effectiveStartDate"), where=f"{where}.effectiveStartDate")
    if start is None:
        raise InputError(f"{where}: effectiveStartDate is missing")
    end = parse_time(item.get("effectiveEndDate"), where=f"{where}.effectiveEndDate")
    rec = PriceRecord("azure", str(region), str(instance), capacity, price, None,
                      str(item.get("currencyCode") or "USD"), start, end, source)
    return rank, rec


def _term_years(term: Any, where: str) -> float:
    m = re.match(r"^\s*(\d+)\s*years?\s*$", str(term or ""), re.IGNORECASE)
    if not m:
        raise InputError(f"{where}: reservationTerm {term!r} is not like '1 Year' / '3 Years'")
    return float(m.group(1))


def iter_pages(start: Path | str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Yield (page name, Items) for the page at ``start`` and every page its links lead to."""
    seen: set[str] = set()
    current: str | None = str(start)
    previous: str | None = None
    for _ in range(_MAX_PAGES):
        if current is None:
            return
        name = current if _is_url(current) else str(Path(current))
        if name in seen:
            raise InputError(f"{previous}: NextPageLink leads back to {name} (a loop)")
        seen.add(name)
        doc = _fetch(current) if _is_url(current) else _read(Path(current))
        if not isinstance(doc, dict) or not isinstance(doc.get("Items"), list):
            raise InputError(f"{name}: not an Azure Retail Prices page (no 'Items' array)")
        yield name, doc["Items"]
        link = doc.get("NextPageLink")
        previous = name
        current = _resolve(link, current) if link else None
    raise InputError(f"{start}: more than {_MAX_PAGES} pages")


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _resolve(link: str, current: str) -> str:
    if _is_url(current):
        return link  # a live crawl follows the API's own links
    here = Path(current)
    if link.startswith("file://"):
        return unquote(urlparse(link).path)
    if not _is_url(link):
        return str(here.parent / link) if not Path(link).is_absolute() else link
    m = _NUMBERED.match(here.name)
    if m:
        nxt = here.with_name(f"{m['stem']}{m['sep']}{int(m['n']) + 1}{m['ext']}")
        if nxt.exists():
            return str(nxt)
    raise InputError(f"{current}: NextPageLink {link} is a URL and no next page file was found beside it "
                     "(save pages as <name>-1.json, <name>-2.json, ... or pass the URL itself)")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the price page: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None


def _fetch(url: str) -> Any:
    import httpx

    try:
        resp = httpx.get(url, timeout=60.0, follow_redirects=True)
    except httpx.TransportError as exc:
        raise TransientError(f"{url}: {exc}") from exc
    if resp.status_code == 429 or resp.status_code >= 500:
        raise TransientError(f"{url}: HTTP {resp.status_code}")
    if resp.status_code != 200:
        raise InputError(f"{url}: HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        return resp.json()
    except ValueError:
        raise InputError(f"{url}: the response is not JSON") from None
