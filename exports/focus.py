"""The FOCUS 1.3 allocation export: select a period of ``fct_focus_allocation_daily``, format it.

Every number (ratios, allocated amounts) comes from the mart; this module only renames the columns
to FOCUS ids, serialises ``AllocatedMethodDetails`` / ``AllocatedTags`` / ``Tags`` as JSON text and
writes the file (CSV or Parquet) aside, then renames it over the target, so an existing file is never
half-written. A period with no rows raises :class:`InputError` and writes nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from gpufinops.errors import InputError

__all__ = ["FOCUS_VERSION", "COLUMNS", "TAG_PREFIX", "ExportResult", "export_rows", "write_export", "parse_day"]

FOCUS_VERSION = "1.3"
TAG_PREFIX = "gpufinops/"  # data generator-defined tag keys are prefixed (FOCUS 1.3 AllocatedTags)
_ALLOCATED_TAG_KEYS = ("team", "tenant", "namespace", "workload", "tier")
MART = "fct_focus_allocation_daily"

# (FOCUS column id, mart column, arrow type): the mandatory FOCUS 1.3 columns first, then the
# conditional ones the bill carries, then split cost allocation, then our x_ columns.
_TS = pa.timestamp("us", tz="UTC")
COLUMNS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("BilledCost", "billed_cost", pa.float64()),
    ("BillingAccountId", "billing_account_id", pa.string()),
    ("BillingAccountName", "billing_account_name", pa.string()),
    ("BillingCurrency", "billing_currency", pa.string()),
    ("BillingPeriodEnd", "billing_period_end", _TS),
    ("BillingPeriodStart", "billing_period_start", _TS),
    ("ChargeCategory", "charge_category", pa.string()),
    ("ChargeClass", "charge_class", pa.string()),
    ("ChargeDescription", "charge_description", pa.string()),
    ("ChargePeriodEnd", "charge_period_end", _TS),
    ("ChargePeriodStart", "charge_period_start", _TS),
    ("ContractedCost", "contracted_cost", pa.float64()),
    ("EffectiveCost", "effective_cost", pa.float64()),
    ("HostProviderName", "host_provider_name", pa.string()),
    ("InvoiceIssuerName", "invoice_issuer_name", pa.string()),
    ("ListCost", "list_cost", pa.float64()),
    ("PricingQuantity", "pricing_quantity", pa.float64()),
    ("PricingUnit", "pricing_unit", pa.string()),
    ("ServiceCategory", "service_category", pa.string()),
    ("ServiceName", "service_name", pa.string()),
    ("ServiceProviderName", "service_provider_name", pa.string()),
    # conditional columns carried from the origin charge
    ("AvailabilityZone", "availability_zone", pa.string()),
    ("ChargeFrequency", "charge_frequency", pa.string()),
    ("CommitmentDiscountId", "commitment_discount_id", pa.string()),
    ("ConsumedQuantity", "consumed_quantity", pa.float64()),
    ("ConsumedUnit", "consumed_unit", pa.string()),
    ("PricingCategory", "pricing_category", pa.string()),
    ("RegionId", "region_id", pa.string()),
    ("ResourceId", "resource_id", pa.string()),
    ("ResourceName", "resource_name", pa.string()),
    ("ResourceType", "resource_type", pa.string()),
    ("SkuId", "sku_id", pa.string()),
    ("SkuPriceId", "sku_price_id", pa.string()),
    ("SubAccountId", "sub_account_id", pa.string()),
    ("Tags", "tags", pa.string()),
    # split cost allocation (FOCUS 1.3)
    ("AllocatedMethodId", "allocated_method_id", pa.string()),
    ("AllocatedMethodDetails", "allocated_method_details", pa.string()),
    ("AllocatedResourceId", "allocated_resource_id", pa.string()),
    ("AllocatedResourceName", "allocated_resource_name", pa.string()),
    ("AllocatedTags", "allocated_tags", pa.string()),
    # custom columns (x_ prefix): where the origin charge came from
    ("x_ChargeOrigin", "charge_origin", pa.string()),
    ("x_OriginChargeId", "origin_charge_id", pa.string()),
    ("x_Cluster", "cluster", pa.string()),
)

_SELECT = [
    "charge_origin", "origin_charge_id", "row_kind", "cluster", "billing_period_start", "billing_period_end",
    "charge_period_start", "charge_period_end", "billing_account_id", "billing_account_name", "sub_account_id",
    "service_provider_name", "host_provider_name", "invoice_issuer_name", "service_name", "service_category",
    "charge_category", "charge_class", "charge_description", "charge_frequency", "pricing_category",
    "commitment_discount_id", "resource_id", "resource_name", "resource_type", "region_id", "availability_zone",
    "sku_id", "sku_price_id", "consumed_unit", "pricing_unit", "billing_currency", "tags", "billed_cost",
    "effective_cost", "list_cost", "contracted_cost", "pricing_quantity", "consumed_quantity",
    "allocated_method_id", "allocated_ratio", "allocated_resource_id", "allocated_resource_name", "namespace",
    "workload", "team", "tenant", "tier", "gpu_ratio", "gpu_usage_unit", "gpu_usage_quantity", "cpu_ratio",
    "vcpu_hours", "memory_ratio", "gib_hours",
]


@dataclass(frozen=True)
class ExportResult:
    path: Path
    rows: int
    allocated_rows: int
    passthrough_rows: int
    billed_cost: float
    effective_cost: float
    charge_origins: tuple[str, ...]


def parse_day(text: str, option: str) -> date:
    try:
        return datetime.strptime(text, "%Y-%m-%d").date()
    except ValueError:
        raise InputError(f"{option} {text!r}: use YYYY-MM-DD") from None


def export_rows(con: duckdb.DuckDBPyConnection, start: date, end: date) -> pa.Table:
    """The FOCUS rows of the charges whose ChargePeriodStart day is in [start, end] (inclusive), formatted."""
    if end < start:
        raise InputError(f"--end {end} is before --start {start}")
    try:
        cur = con.execute(
            f"select {', '.join(_SELECT)} from {MART} where day >= ? and day < ? "
            "order by charge_period_start, origin_charge_id, row_kind, allocated_resource_id nulls last",
            [start, end + timedelta(days=1)],
        )
    except duckdb.CatalogException as exc:
        raise InputError(f"the warehouse has no {MART} yet; run `gpufinops build` first ({exc})") from None
    names = [d[0] for d in cur.description]
    records = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    if not records:
        raise InputError(f"no charges from {start} to {end} in the warehouse: nothing exported, no file written")
    for rec in records:
        tags = _tags_dict(rec["tags"])
        rec["tags"] = json.dumps(tags, sort_keys=True) if tags else None
        rec["allocated_method_details"] = _method_details(rec)
        rec["allocated_tags"] = _allocated_tags(rec, tags)
    arrays = {}
    for focus_name, col, typ in COLUMNS:
        values = [rec[col] for rec in records]
        if pa.types.is_timestamp(typ):
            values = [None if v is None else _utc(v) for v in values]
        arrays[focus_name] = pa.array(values, typ)
    return pa.table(arrays)


def write_export(con: duckdb.DuckDBPyConnection, start: date, end: date, out: Path | str,
                 fmt: str | None = None) -> ExportResult:
    """Export [start, end] to ``out`` (csv or parquet, from ``fmt`` or the suffix): written aside, then renamed."""
    out = Path(out)
    fmt = (fmt or ("parquet" if out.suffix.lower() in (".parquet", ".pq") else "csv")).lower()
    if fmt not in ("csv", "parquet"):
        raise InputError(f"--format {fmt!r}: use csv or parquet")
    table = export_rows(con, start, end)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if fmt == "parquet":
            pq.write_table(table, tmp)
        else:
            pacsv.write_csv(_csv_table(table), tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    origins = table.column("x_ChargeOrigin").to_pylist()
    methods = table.column("AllocatedMethodId").to_pylist()
    return ExportResult(
        path=out,
        rows=table.num_rows,
        allocated_rows=sum(1 for m in methods if m is not None),
        passthrough_rows=sum(1 for m in methods if m is None),
        billed_cost=sum(table.column("BilledCost").to_pylist()),
        effective_cost=sum(table.column("EffectiveCost").to_pylist()),
        charge_origins=tuple(sorted(set(origins))),
    )


def export_bytes(con: duckdb.DuckDBPyConnection, start: date, end: date, fmt: str = "csv") -> bytes:
    """The export as the bytes of a CSV or Parquet file (for the API and the dashboard download)."""
    table = export_rows(con, start, end)
    sink = pa.BufferOutputStream()
    if fmt == "parquet":
        pq.write_table(table, sink)
    elif fmt == "csv":
        pacsv.write_csv(_csv_table(table), sink)
    else:
        raise InputError(f"format {fmt!r}: use csv or parquet")
    return sink.getvalue().to_pybytes()


# -- formatting -----------------------------------------------------------------------------------

def _utc(value: datetime) -> datetime:
    # The warehouse keeps naive UTC times (DESIGN §3).
    from datetime import UTC

    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _csv_table(table: pa.Table) -> pa.Table:
    """Times as ISO-8601 with a Z, as FOCUS files carry them."""
    cols = []
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = pa.array([None if v is None else v.strftime("%Y-%m-%dT%H:%M:%SZ") for v in col.to_pylist()],
                           pa.string())
        cols.append(col)
    return pa.table(dict(zip(table.column_names, cols, strict=True)))


def _tags_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str):  # map as [(k, v), ...]
        return dict(value)
    return dict(json.loads(value))


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _method_details(rec: dict[str, Any]) -> str | None:
    if rec["allocated_method_id"] is None:
        return None
    elements: list[dict[str, Any]]
    if rec["row_kind"] == "allocated":
        elements = [{"AllocatedRatio": _num(rec["gpu_ratio"]), "UsageUnit": rec["gpu_usage_unit"],
                     "UsageQuantity": _num(rec["gpu_usage_quantity"])},
                    {"AllocatedRatio": _num(rec["cpu_ratio"]), "UsageUnit": "vCPU-Hours",
                     "UsageQuantity": _num(rec["vcpu_hours"])},
                    {"AllocatedRatio": _num(rec["memory_ratio"]), "UsageUnit": "GiB-Hours",
                     "UsageQuantity": _num(rec["gib_hours"])}]
        # A row's elements add up to its ratio; the node's unrated remainder (if any) is in the last one.
        rest = _num(rec["allocated_ratio"]) - sum(e["AllocatedRatio"] or 0.0 for e in elements)  # type: ignore[operator]
        if abs(rest) > 1e-12:
            elements.append({"AllocatedRatio": rest, "UsageUnit": "USD", "x_Component": "unrated"})
        elements = [e for e in elements if e["AllocatedRatio"]]
        if not elements:
            elements = [{"AllocatedRatio": _num(rec["allocated_ratio"])}]
    else:
        elements = [{"AllocatedRatio": _num(rec["allocated_ratio"]), "UsageUnit": rec["gpu_usage_unit"],
                     "UsageQuantity": _num(rec["gpu_usage_quantity"])}]
    details: dict[str, Any] = {"Elements": elements, "x_ChargeOrigin": rec["charge_origin"],
                               "x_RowKind": rec["row_kind"]}
    return json.dumps(details, sort_keys=False)


def _allocated_tags(rec: dict[str, Any], tags: dict[str, Any]) -> str | None:
    if rec["allocated_method_id"] is None or rec["row_kind"] == "unallocated":
        return None if rec["allocated_method_id"] is None else json.dumps({f"{TAG_PREFIX}allocation": "unallocated"})
    out = {}
    for key in _ALLOCATED_TAG_KEYS:
        value = rec[key]
        if value is None or key in tags or f"{TAG_PREFIX}{key}" in tags:
            continue  # never repeat a key the charge's own Tags has
        out[f"{TAG_PREFIX}{key}"] = value
    return json.dumps(out, sort_keys=True)
