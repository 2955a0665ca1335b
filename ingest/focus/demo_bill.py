"""A FOCUS 1.2 bill for the demo fleet, made from the warehouse's ``fct_node_hourly``.

One line per node and day, priced as the warehouse priced it (``BilledCost`` = ``ListCost`` = the
summed ``node_cost_usd``, so a matched node reconciles to its computed cost), with a realistic
discount on a subset of the on-demand fleet in ``EffectiveCost`` (see :data:`DISCOUNTS`: a compute
savings plan at 28% on AWS p4d/p4de/p5, a 1-year CUD at 37% on GCP a2/a3, a reservation at 40% on Azure
ND), spot nodes at the spot price they were costed at (``PricingCategory`` Dynamic), plus lines
that belong to no node (block storage, NAT gateways, a support fee per billing period) which the
reconciliation must report as ``only_in_bill``.

Resource ids follow each provider's bill, derived from the node's ``spec.providerID``:
AWS ``i-...`` (last path segment of ``aws:///zone/i-...``), GCP
``//compute.googleapis.com/projects/<p>/zones/<z>/instances/<numeric id>`` with ``ResourceName`` =
the instance name, Azure the VM(SS instance) ARM path (``azure://`` prefix removed).
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from gpufinops.errors import InputError
from ingest.lake import partition_files

__all__ = ["DISCOUNTS", "DiscountRule", "DemoBill", "BILL_COLUMNS", "write_demo_bill"]


@dataclass(frozen=True)
class DiscountRule:
    provider: str
    instance_prefixes: tuple[str, ...]
    discount: float  # fraction off the list price
    pricing_category: str
    commitment_id: str
    description: str


DISCOUNTS = (
    DiscountRule("aws", ("p4d", "p5."), 0.28, "Committed",
                 "arn:aws:savingsplans::111122223333:savingsplan/sp-demo-compute-1", "covered by Compute Savings Plan"),
    DiscountRule("gcp", ("a2-", "a3-"), 0.37, "Committed",
                 "projects/demo-research/regions/us-central1/commitments/demo-cud-1y", "covered by 1-year CUD"),
    DiscountRule("azure", ("Standard_ND",), 0.40, "Committed",
                 "/providers/Microsoft.Capacity/reservationOrders/demo-ro/reservations/demo-ri-1y", "covered by reservation"),
)
_PROVIDER = {
    "aws": ("Amazon Web Services", "Amazon Web Services, Inc.", "111122223333", "Amazon Elastic Compute Cloud"),
    "gcp": ("Google Cloud", "Google Cloud", "01DEMO-000000-000001", "Compute Engine"),
    "azure": ("Microsoft", "Microsoft", "/providers/Microsoft.Billing/billingAccounts/demo", "Virtual Machines"),
    "unknown": ("Unknown", "Unknown", "demo", "Compute"),
}
# (service, category, resource type, description, id pattern, $ per day per cluster)
_OTHER_DAILY = {
    "aws": [("Amazon Elastic Block Store", "Storage", "Volume", "gp3 storage (3 x 500 GB)", "vol-0demo{h}", 3 * 500 * 0.08 / 30.0),
            ("Amazon Virtual Private Cloud", "Networking", "NAT Gateway", "NAT Gateway hours and data processing",
             "arn:aws:ec2:{region}:111122223333:natgateway/nat-0demo{h}", 0.045 * 24 + 2.70)],
    "gcp": [("Compute Engine", "Storage", "Persistent Disk", "Balanced PD capacity (1.5 TB)",
             "//compute.googleapis.com/projects/demo-{cluster}/zones/{zone}/disks/pd-demo-{h}", 1536 * 0.10 / 30.0),
            ("Cloud NAT", "Networking", "NAT Gateway", "Cloud NAT gateway uptime and data processing",
             "//compute.googleapis.com/projects/demo-{cluster}/regions/{region}/routers/nat-demo-{h}", 0.044 * 24 + 1.80)],
    "azure": [("Storage", "Storage", "Managed Disk", "Premium SSD P30 (3 disks)",
               "/subscriptions/demo/resourceGroups/MC_{cluster}/providers/Microsoft.Compute/disks/disk-demo-{h}", 3 * 135.17 / 30.0),
              ("Virtual Network", "Networking", "NAT Gateway", "NAT gateway hours and data processed",
               "/subscriptions/demo/resourceGroups/MC_{cluster}/providers/Microsoft.Network/natGateways/nat-demo-{h}", 0.045 * 24 + 2.25)],
}
_SUPPORT = {"aws": "AWS Support (Business)", "gcp": "Cloud Customer Care (Enhanced)", "azure": "Azure Support (Standard)"}
_SUPPORT_SHARE = 0.03  # of the period's compute list cost

BILL_COLUMNS = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingAccountType", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd",
    "ChargePeriodStart", "CommitmentDiscountId", "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "EffectiveCost",
    "InvoiceId", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory", "PricingCurrency", "PricingQuantity",
    "PricingUnit", "ProviderName", "PublisherName", "RegionId", "AvailabilityZone", "ResourceId", "ResourceName",
    "ResourceType", "ServiceCategory", "ServiceName", "SkuId", "SubAccountId", "SubAccountName", "Tags",
]


@dataclass
class DemoBill:
    path: Path
    node_lines: int
    other_lines: int
    billed_cost: float
    effective_cost: float


@dataclass(frozen=True)
class _Node:
    provider: str
    provider_id: str
    region: str
    zone: str


def write_demo_bill(con: duckdb.DuckDBPyConnection, out: Path | str, *, lake_dir: Path | str | None = None) -> DemoBill:
    """Write the FOCUS 1.2 CSV for every node-day in ``fct_node_hourly`` to ``out``.

    Node facts (provider, ``provider_id``, region, zone) come from the warehouse (``dim_node`` or
    ``int_nodes_hourly``) when it has them, else from the latest ``k8s_nodes`` snapshot in ``lake_dir``.
    """
    out = Path(out)
    try:
        days = con.execute(
            "select cast(date_trunc('day', hour) as date) as day, cluster, node, any_value(node_pool) as node_pool, "
            "any_value(instance_type) as instance_type, any_value(capacity_type) as capacity_type, "
            "count(*) as hours, sum(node_cost_usd) as cost from fct_node_hourly "
            "group by all order by day, cluster, node").fetchall()
    except duckdb.Error as exc:
        raise InputError(f"cannot read fct_node_hourly from the warehouse (run `gpufinops build` first): {exc}") from exc
    facts = _node_facts(con, lake_dir)
    lines: list[dict[str, Any]] = []
    compute_list: dict[tuple[str, date, str], float] = defaultdict(float)  # (provider, period, cluster)
    clusters: dict[tuple[str, str], _Node] = {}
    for day, cluster, node, pool, itype, capacity, hours, cost in days:
        fact = facts.get((cluster, node)) or _Node("unknown", "", "", "")
        clusters.setdefault((fact.provider, cluster), fact)
        line = _node_line(day, cluster, node, pool, itype or "", capacity or "on_demand", int(hours), float(cost or 0.0), fact)
        compute_list[(fact.provider, _period(day)[0], cluster)] += float(cost or 0.0)
        lines.append(line)
    node_lines = len(lines)
    all_days = sorted({row[0] for row in days})
    for (provider, cluster), fact in sorted(clusters.items()):
        for day in all_days:
            for n, spec in enumerate(_OTHER_DAILY.get(provider, [])):
                lines.append(_other_line(day, cluster, provider, fact, spec, n))
    for (provider, period, cluster), total in sorted(compute_list.items()):
        if provider in _SUPPORT and total > 0:
            lines.append(_support_line(period, cluster, provider, total))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=BILL_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(lines)
    return DemoBill(out, node_lines, len(lines) - node_lines, sum(x["BilledCost"] for x in lines),
                    sum(x["EffectiveCost"] for x in lines))


def _period(day: date) -> tuple[date, date]:
    start = day.replace(day=1)
    end = (start + timedelta(days=32)).replace(day=1)
    return start, end


def _ts(d: date) -> str:
    return datetime(d.year, d.month, d.day, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _h(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:12]


def _common(day: date, provider: str, cluster: str) -> dict[str, Any]:
    name, issuer, account, _ = _PROVIDER.get(provider, _PROVIDER["unknown"])
    p_start, p_end = _period(day)
    return {
        "BillingAccountId": account, "BillingAccountName": f"demo {provider}", "BillingAccountType": "Billing Account",
        "BillingCurrency": "USD", "BillingPeriodStart": _ts(p_start), "BillingPeriodEnd": _ts(p_end),
        "ChargeCategory": "Usage", "ChargeClass": "", "ChargeFrequency": "Usage-Based",
        "ChargePeriodStart": _ts(day), "ChargePeriodEnd": _ts(day + timedelta(days=1)),
        "InvoiceId": f"DEMO-{provider.upper()}-{p_start:%Y%m}", "InvoiceIssuerName": issuer, "PricingCurrency": "USD",
        "ProviderName": name, "PublisherName": name, "SubAccountId": f"demo-{cluster}", "SubAccountName": cluster,
    }


def _resource(node: str, fact: _Node) -> tuple[str, str, str]:
    """(ResourceId, ResourceName, ResourceType) as the provider's bill names the node's VM."""
    pid = fact.provider_id
    if fact.provider == "aws" and pid:
        return pid.rstrip("/").rsplit("/", 1)[-1], node, "Instance"
    if fact.provider == "gcp" and pid:
        parts = pid.removeprefix("gce://").split("/")
        project, zone, name = (parts + ["", "", ""])[:3] if len(parts) >= 3 else ("demo", fact.zone, node)
        numeric = str(int(_h(pid), 16) % 10**19)
        return f"//compute.googleapis.com/projects/{project}/zones/{zone}/instances/{numeric}", name, "Compute Instance"
    if fact.provider == "azure" and pid:
        rid = pid.removeprefix("azure://")
        parts = rid.strip("/").split("/")
        if "virtualMachineScaleSets" in parts and len(parts) >= 2:  # Azure names a VMSS instance <vmss>_<n>
            return rid, f"{parts[parts.index('virtualMachineScaleSets') + 1]}_{parts[-1]}", "Virtual machine scale set instance"
        return rid, parts[-1], "Virtual machine"
    return node, node, "Node"


def _node_line(day: date, cluster: str, node: str, pool: str | None, itype: str, capacity: str, hours: int,
               cost: float, fact: _Node) -> dict[str, Any]:
    rid, rname, rtype = _resource(node, fact)
    effective, category, commitment, note = cost, "Standard", "", "on-demand"
    if capacity == "spot":
        category, note = "Dynamic", "spot"
    elif capacity == "reserved":
        category, note = "Committed", "reserved"
    else:
        rule = next((r for r in DISCOUNTS if r.provider == fact.provider and itype.startswith(r.instance_prefixes)), None)
        if rule is not None:
            effective, category, commitment, note = cost * (1.0 - rule.discount), rule.pricing_category, rule.commitment_id, rule.description
    cost, effective = round(cost, 10), round(effective, 10)  # bills carry ~10 decimals, not float noise
    line = _common(day, fact.provider, cluster)
    line.update({
        "BilledCost": cost, "ListCost": cost, "EffectiveCost": effective,
        "ContractedCost": effective if commitment else cost, "ListUnitPrice": round(cost / hours, 10) if hours else 0.0,
        "ChargeDescription": f"{itype} {note}", "CommitmentDiscountId": commitment, "PricingCategory": category,
        "ConsumedQuantity": hours, "ConsumedUnit": "Hours", "PricingQuantity": hours, "PricingUnit": "Hours",
        "RegionId": fact.region, "AvailabilityZone": fact.zone, "ResourceId": rid, "ResourceName": rname, "ResourceType": rtype,
        "ServiceCategory": "Compute", "ServiceName": _PROVIDER.get(fact.provider, _PROVIDER["unknown"])[3],
        "SkuId": f"DEMO-{itype}-{capacity}", "Tags": json.dumps({"cluster": cluster, "node_pool": pool or ""}, sort_keys=True),
    })
    return line


def _other_line(day: date, cluster: str, provider: str, fact: _Node, spec: tuple, n: int) -> dict[str, Any]:
    service, category, rtype, desc, pattern, per_day = spec
    per_day = round(per_day, 6)
    rid = pattern.format(h=_h(cluster, str(n)), cluster=cluster, region=fact.region or "region", zone=fact.zone or "zone")
    line = _common(day, provider, cluster)
    line.update({
        "BilledCost": per_day, "ListCost": per_day, "EffectiveCost": per_day, "ContractedCost": per_day, "ListUnitPrice": "",
        "ChargeDescription": desc, "CommitmentDiscountId": "", "PricingCategory": "Standard",
        "ConsumedQuantity": 1, "ConsumedUnit": "Day", "PricingQuantity": 1, "PricingUnit": "Day",
        "RegionId": fact.region, "AvailabilityZone": "", "ResourceId": rid, "ResourceName": rid.rsplit("/", 1)[-1],
        "ResourceType": rtype, "ServiceCategory": category, "ServiceName": service, "SkuId": f"DEMO-{rtype.replace(' ', '')}",
        "Tags": json.dumps({"cluster": cluster}, sort_keys=True),
    })
    return line


def _support_line(period: date, cluster: str, provider: str, compute_total: float) -> dict[str, Any]:
    fee = round(compute_total * _SUPPORT_SHARE, 2)
    line = _common(period, provider, cluster)
    p_start, p_end = _period(period)
    line.update({
        "ChargePeriodStart": _ts(p_start), "ChargePeriodEnd": _ts(p_end), "ChargeCategory": "Purchase",
        "ChargeFrequency": "Recurring", "BilledCost": fee, "ListCost": fee, "EffectiveCost": fee, "ContractedCost": fee,
        "ListUnitPrice": "", "ChargeDescription": f"{_SUPPORT[provider]} fee, {int(_SUPPORT_SHARE * 100)}% of compute",
        "CommitmentDiscountId": "", "PricingCategory": "Standard", "ConsumedQuantity": "", "ConsumedUnit": "",
        "PricingQuantity": 1, "PricingUnit": "Month", "RegionId": "", "AvailabilityZone": "", "ResourceId": "",
        "ResourceName": "", "ResourceType": "", "ServiceCategory": "Management and Governance",
        "ServiceName": _SUPPORT[provider], "SkuId": "DEMO-SUPPORT", "Tags": json.dumps({"cluster": cluster}),
    })
    return line


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    return {r[0] for r in con.execute(
        "select column_name from information_schema.columns where table_name = ?", [table]).fetchall()}


def _node_facts(con: duckdb.DuckDBPyConnection, lake_dir: Path | str | None) -> dict[tuple[str, str], _Node]:
    """Latest (provider, provider_id, region, zone) per node: from the warehouse when a model has
    ``provider_id`` (``dim_node``, else ``int_nodes_hourly``), else from the lake's ``k8s_nodes``."""
    for table, time_col in (("dim_node", None), ("int_nodes_hourly", "hour")):
        cols = _columns(con, table)
        if not {"cluster", "node", "provider_id"} <= cols:
            continue
        pick = [c if c in cols else f"null as {c}" for c in ("provider", "region", "zone")]
        if time_col and time_col in cols:
            sql = (f"select cluster, node, arg_max(provider_id, {time_col}), "
                   + ", ".join(f"arg_max({c}, {time_col})" if c in cols else "null" for c in ("provider", "region", "zone"))
                   + f" from {table} group by cluster, node")
        else:
            sql = f"select cluster, node, provider_id, {', '.join(pick)} from {table}"
        return {(c, n): _Node(p or _provider_of(pid), pid or "", r or "", z or "") for c, n, pid, p, r, z in con.execute(sql).fetchall()}
    files = partition_files(lake_dir, "k8s_nodes") if lake_dir is not None else []
    if not files:
        return {}
    rows = duckdb.connect().execute(
        "select cluster, node, arg_max(provider_id, snapshot_ts), arg_max(provider, snapshot_ts), "
        "arg_max(region, snapshot_ts), arg_max(zone, snapshot_ts) "
        "from read_parquet(?, union_by_name=true, hive_partitioning=false) group by all",
        [[str(f) for f in files]]).fetchall()
    return {(c, n): _Node(p or _provider_of(pid), pid or "", r or "", z or "") for c, n, pid, p, r, z in rows}


def _provider_of(provider_id: str | None) -> str:
    pid = provider_id or ""
    for prefix, name in (("aws://", "aws"), ("gce://", "gcp"), ("azure://", "azure")):
        if pid.startswith(prefix):
            return name
    return "unknown"
