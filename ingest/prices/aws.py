"""AWS Price List bulk offer file for EC2 (``AmazonEC2``), JSON or CSV form, to ``prices`` rows.

What is kept (the shapes a Kubernetes GPU node runs as): ``operatingSystem`` Linux, ``tenancy``
Shared, ``preInstalledSw`` NA, ``capacitystatus`` Used, hourly (``Hrs``) price dimensions, price > 0.
Everything else (Windows, RHEL, dedicated hosts, SQL Server AMIs, capacity-reservation lines) is skipped.

Capacity types: ``OnDemand`` terms become ``on_demand``. ``Reserved`` terms become one ``reserved``
row per instance type, region and effective date: the term preferred in the order 1yr before 3yr,
No Upfront before Partial before All Upfront, standard before convertible; its rate is the hourly
charge plus any upfront fee amortised over the lease (8,760 h a year), i.e. the No Upfront hourly
rate whenever such a term exists. The bulk file has no spot prices (AWS publishes them elsewhere),
so no ``spot`` rows come from it. ``gpu_usd_per_hour`` is unknown here (AWS prices the instance as
a whole) and left null.

Size: the CSV form is streamed and filtered row by row; the JSON form is parsed whole, so for
the large per-region offer files (hundreds of MB) prefer the CSV form.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from gpufinops.errors import InputError
from ingest.prices.base import PriceParser, PriceRecord, dedupe_records, parse_time, register_parser

__all__ = ["AwsOfferParser", "AWS_LOCATIONS"]

# The JSON offer file has ``regionCode`` since 2021; older files and CSVs only name the location.
AWS_LOCATIONS = {
    "US East (N. Virginia)": "us-east-1",
    "US East (Ohio)": "us-east-2",
    "US West (N. California)": "us-west-1",
    "US West (Oregon)": "us-west-2",
    "Canada (Central)": "ca-central-1",
    "EU (Frankfurt)": "eu-central-1",
    "EU (Ireland)": "eu-west-1",
    "EU (London)": "eu-west-2",
    "EU (Paris)": "eu-west-3",
    "EU (Stockholm)": "eu-north-1",
    "Asia Pacific (Tokyo)": "ap-northeast-1",
    "Asia Pacific (Seoul)": "ap-northeast-2",
    "Asia Pacific (Mumbai)": "ap-south-1",
    "Asia Pacific (Singapore)": "ap-southeast-1",
    "Asia Pacific (Sydney)": "ap-southeast-2",
    "South America (Sao Paulo)": "sa-east-1",
}
# CSV column -> JSON attribute name, so both forms go through one filter.
_CSV_ATTRS = {
    "Instance Type": "instanceType",
    "Region Code": "regionCode",
    "Location": "location",
    "Operating System": "operatingSystem",
    "Tenancy": "tenancy",
    "Pre Installed S/W": "preInstalledSw",
    "CapacityStatus": "capacitystatus",
    "Product Family": "productFamily",
}
_KEEP = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
_HOURS_PER_YEAR = 8760.0


@dataclass
class _Term:
    """One offer term of one SKU, whichever form it came from."""

    sku: str
    attrs: dict[str, str]
    term_type: str  # OnDemand | Reserved
    effective: datetime
    lease: str = ""
    purchase_option: str = ""
    offering_class: str = ""
    hourly: float = 0.0
    upfront: float = 0.0
    currency: str = "USD"
    has_hourly: bool = False
    where: str = ""


@register_parser
class AwsOfferParser(PriceParser):
    format = "aws"
    description = "AWS Price List bulk offer file for EC2 (JSON or CSV form)"

    def parse(self, path: Path | str, *, regions: Sequence[str] = ()) -> list[PriceRecord]:
        path = Path(path)
        terms = _json_terms(path, _read_text(path)) if _looks_like_json(path) else _csv_terms(path)
        wanted = set(regions)
        source = self.source_of(path)
        on_demand: list[PriceRecord] = []
        reserved: dict[tuple[str, str, datetime], tuple[tuple[int, int, int], PriceRecord]] = {}
        for term in terms:
            if any(term.attrs.get(k) != v for k, v in _KEEP.items()) or not term.attrs.get("instanceType"):
                continue
            region = term.attrs.get("regionCode") or AWS_LOCATIONS.get(term.attrs.get("location", ""), "")
            if not region:
                raise InputError(f"{term.where}: SKU {term.sku} has no regionCode and an unknown location "
                                 f"{term.attrs.get('location')!r}")
            if wanted and region not in wanted:
                continue
            if not term.has_hourly:
                continue
            if term.term_type == "OnDemand":
                rate, capacity = term.hourly, "on_demand"
            elif term.term_type == "Reserved":
                years = _lease_years(term.lease, term.where)
                rate, capacity = term.hourly + term.upfront / (years * _HOURS_PER_YEAR), "reserved"
            else:
                continue
            if rate <= 0:
                continue
            rec = PriceRecord("aws", region, term.attrs["instanceType"], capacity, rate, None, term.currency,
                              term.effective, None, source)
            if capacity == "on_demand":
                on_demand.append(rec)
                continue
            rank = _reserved_rank(term)
            slot = (region, rec.instance_type, term.effective)
            if slot not in reserved or rank < reserved[slot][0]:
                reserved[slot] = (rank, rec)
        return dedupe_records(on_demand + [rec for _, rec in reserved.values()], what=source)


def _looks_like_json(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the price file: {exc}") from exc
    return head.startswith(b"{")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the price file: {exc}") from exc


def _lease_years(lease: str, where: str) -> float:
    text = lease.strip().lower()
    if text.endswith("yr") and text[:-2].isdigit():
        return float(text[:-2])
    raise InputError(f"{where}: reserved term has an unreadable LeaseContractLength {lease!r}")


def _reserved_rank(term: _Term) -> tuple[int, int, int]:
    lease = 0 if term.lease.strip().lower() == "1yr" else 1
    option = {"no upfront": 0, "partial upfront": 1, "all upfront": 2}.get(term.purchase_option.strip().lower(), 3)
    klass = 0 if term.offering_class.strip().lower() == "standard" else 1
    return (lease, option, klass)


def _price(value: Any, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: price {value!r} is not a number") from None


def _add_dimension(term: _Term, unit: str, price: float, currency: str) -> None:
    """Hourly dimensions set the rate; a ``Quantity`` dimension is an upfront fee."""
    unit = unit.strip()
    if unit in ("Hrs", "Hours", "Hour"):
        term.hourly += price
        term.has_hourly = True
        term.currency = currency
    elif unit == "Quantity":
        term.upfront += price


# -- JSON form ------------------------------------------------------------------------------------

def _json_terms(path: Path, text: str) -> Iterator[_Term]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    if not isinstance(doc, dict) or "products" not in doc or "terms" not in doc:
        raise InputError(f"{path}: not an AWS offer file (no 'products' and 'terms' at the top level)")
    products = doc["products"]
    for term_type in ("OnDemand", "Reserved"):
        for sku, by_code in (doc["terms"].get(term_type) or {}).items():
            product = products.get(sku)
            if product is None:
                continue
            attrs = {k: str(v) for k, v in (product.get("attributes") or {}).items()}
            for code, body in by_code.items():
                where = f"{path}: terms.{term_type}.{sku}.{code}"
                effective = parse_time(body.get("effectiveDate"), where=where)
                if effective is None:
                    raise InputError(f"{where}: effectiveDate is missing")
                ta = body.get("termAttributes") or {}
                term = _Term(sku, attrs, term_type, effective, ta.get("LeaseContractLength", ""),
                             ta.get("PurchaseOption", ""), ta.get("OfferingClass", ""), where=where)
                for dim in (body.get("priceDimensions") or {}).values():
                    per_unit = dim.get("pricePerUnit") or {}
                    currency = "USD" if "USD" in per_unit else next(iter(per_unit), "USD")
                    _add_dimension(term, dim.get("unit", ""), _price(per_unit.get(currency), where), currency)
                yield term


# -- CSV form -------------------------------------------------------------------------------------

def _csv_terms(path: Path) -> Iterator[_Term]:
    """Stream the CSV form in Arrow batches; rows failing the filter are dropped before grouping."""
    header_at, header = _csv_header(path)
    needed = {"SKU", "OfferTermCode", "TermType", "EffectiveDate", "Unit", "PricePerUnit", "Instance Type"}
    missing = sorted(needed - set(header))
    if missing:
        raise InputError(f"{path}: AWS offer CSV lacks column(s) {missing}")
    wanted = needed | {"Currency", "LeaseContractLength", "PurchaseOption", "OfferingClass"} | set(_CSV_ATTRS)
    columns = [c for c in header if c in wanted]
    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(skip_rows=header_at, block_size=16 << 20),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in columns}, include_columns=columns,
                                                 strings_can_be_null=False),
        )
    except pa.ArrowInvalid as exc:
        raise InputError(f"{path}: not a readable AWS offer CSV: {exc}") from exc
    keep = [(col, _KEEP[name]) for col, name in _CSV_ATTRS.items() if name in _KEEP and col in columns]
    terms: dict[tuple[str, str, str], _Term] = {}
    try:
        for batch in reader:
            mask = pc.not_equal(batch.column("Instance Type"), "")
            for col, want in keep:
                mask = pc.and_(mask, pc.equal(batch.column(col), want))
            for row in batch.filter(mask).to_pylist():
                _csv_row(path, row, terms)
    except pa.ArrowInvalid as exc:
        raise InputError(f"{path}: not a readable AWS offer CSV: {exc}") from exc
    return iter(terms.values())


def _csv_header(path: Path) -> tuple[int, list[str]]:
    """The bulk CSV opens with a few "Key","Value" metadata lines before the header."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            for i in range(50):
                line = fh.readline()
                if not line:
                    break
                if line.lstrip('"').startswith("SKU"):
                    return i, next(csv.reader([line]))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the price file: {exc}") from exc
    raise InputError(f"{path}: not an AWS offer CSV (no header line starting with \"SKU\" in the first 50 lines)")


def _csv_row(path: Path, row: dict[str, str], terms: dict[tuple[str, str, str], _Term]) -> None:
    key = (row["SKU"], row["OfferTermCode"], row["TermType"])
    where = f"{path}: SKU {key[0]} term {key[1]}"
    term = terms.get(key)
    if term is None:
        effective = parse_time(row["EffectiveDate"], where=f"{where}, column EffectiveDate")
        if effective is None:
            raise InputError(f"{where}: EffectiveDate is empty")
        attrs = {name: row.get(col) or "" for col, name in _CSV_ATTRS.items()}
        term = terms[key] = _Term(row["SKU"], attrs, row["TermType"], effective, row.get("LeaseContractLength") or "",
                                  row.get("PurchaseOption") or "", row.get("OfferingClass") or "", where=where)
    _add_dimension(term, row["Unit"], _price(row["PricePerUnit"], f"{where}, column PricePerUnit"),
                   row.get("Currency") or "USD")
