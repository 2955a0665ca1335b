"""The demo FOCUS 1.2 bill made from fct_node_hourly: node-day lines, discounts, spot, unmatched lines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from ingest.focus import ingest_focus_files, read_focus_file
from ingest.focus.demo_bill import write_demo_bill
from ingest.lake import LakeWriter

NODES = [  # cluster, node, pool, instance type, capacity, $/h, provider, provider_id, region, zone
    ("prod-aws", "ip-10-0-1-17", "p4d", "p4d.24xlarge", "on_demand", 32.7726, "aws", "aws:///us-east-1a/i-0aaa000000000001", "us-east-1", "us-east-1a"),
    ("prod-aws", "ip-10-0-2-33", "g5-spot", "g5.12xlarge", "spot", 2.0, "aws", "aws:///us-east-1b/i-0aaa000000000002", "us-east-1", "us-east-1b"),
    ("research-gcp", "gke-a2-node-1", "a2", "a2-highgpu-8g", "on_demand", 29.387, "gcp",
     "gce://demo-research/us-central1-a/gke-a2-node-1", "us-central1", "us-central1-a"),
    ("edge-azure", "aks-t4-vmss000000", "t4", "Standard_NC64as_T4_v3", "on_demand", 4.352, "azure",
     "azure:///subscriptions/s1/resourceGroups/mc_edge/providers/Microsoft.Compute/virtualMachineScaleSets/aks-t4-vmss/virtualMachines/0",
     "eastus", "eastus-1"),
]
START = datetime(2026, 11, 30, tzinfo=UTC)  # two days across a month end: two billing periods


def _warehouse(with_dim: bool = True) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("create table fct_node_hourly (hour timestamptz, cluster varchar, node varchar, node_pool varchar, "
                "instance_type varchar, capacity_type varchar, gpu_model varchar, gpu_capacity double, node_cost_usd double)")
    rows = []
    for h in range(48):
        for c, n, pool, t, cap, price, *_ in NODES:
            if n == "gke-a2-node-1" and h >= 30:
                continue  # scaled down mid-day: 6 hours on the second day
            rows.append((START + timedelta(hours=h), c, n, pool, t, cap, "X", 8.0, price))
    con.executemany("insert into fct_node_hourly values (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    if with_dim:
        con.execute("create table dim_node (cluster varchar, node varchar, provider_id varchar, provider varchar, region varchar, zone varchar)")
        con.executemany("insert into dim_node values (?, ?, ?, ?, ?, ?)", [(c, n, pid, p, r, z) for c, n, _, _, _, _, p, pid, r, z in NODES])
    return con


def test_demo_bill_lines_discounts_and_ids(tmp_path: Path) -> None:
    made = write_demo_bill(_warehouse(), tmp_path / "bill.csv")
    bill = read_focus_file(made.path)
    assert bill.version == "1.2"
    rows = bill.table.to_pylist()
    node_rows = [r for r in rows if r["ServiceCategory"] == "Compute"]
    assert made.node_lines == len(node_rows) == 8  # 4 nodes x 2 days
    total_node_cost = sum(price * (30 if n == "gke-a2-node-1" else 48) for _, n, _, _, _, price, *_ in NODES)
    assert sum(r["BilledCost"] for r in node_rows) == pytest.approx(total_node_cost)
    by_id = {(r["ResourceId"], r["ChargePeriodStart"]): r for r in node_rows}
    p4d = by_id[("i-0aaa000000000001", START)]
    assert p4d["BilledCost"] == pytest.approx(24 * 32.7726)
    assert p4d["EffectiveCost"] == pytest.approx(0.72 * p4d["BilledCost"]) and p4d["CommitmentDiscountId"].startswith("arn:aws:savingsplans")
    spot = by_id[("i-0aaa000000000002", START)]
    assert spot["PricingCategory"] == "Dynamic" and spot["EffectiveCost"] == spot["BilledCost"] == pytest.approx(48.0)
    gcp = [r for r in node_rows if r["ProviderName"] == "Google Cloud"]
    assert {r["ResourceName"] for r in gcp} == {"gke-a2-node-1"}
    assert all(r["ResourceId"].startswith("//compute.googleapis.com/projects/demo-research/zones/us-central1-a/instances/") for r in gcp)
    assert sorted(r["ConsumedQuantity"] for r in gcp) == [6.0, 24.0]
    az = [r for r in node_rows if r["ProviderName"] == "Microsoft"]
    assert {r["ResourceId"] for r in az} == {NODES[3][7].removeprefix("azure://")}
    assert all(r["EffectiveCost"] == r["BilledCost"] for r in az)  # NC T4 is not in the reserved subset
    # Non-node lines: storage and NAT per cluster-day, and a support fee per cluster and billing period.
    others = [r for r in rows if r["ServiceCategory"] != "Compute"]
    assert made.other_lines == len(others) == 3 * 2 * 2 + 3 * 2
    node_ids = {r["ResourceId"] for r in node_rows}
    assert not node_ids & {r["ResourceId"] for r in others}
    support = [r for r in others if r["ChargeCategory"] == "Purchase"]
    assert {(r["BillingPeriodStart"].month, r["ProviderName"]) for r in support} == {
        (m, p) for m in (11, 12) for p in ("Amazon Web Services", "Google Cloud", "Microsoft")}
    assert made.billed_cost == pytest.approx(sum(r["BilledCost"] for r in rows))
    assert made.effective_cost < made.billed_cost


def test_demo_bill_lands_per_period_and_provider(tmp_path: Path) -> None:
    made = write_demo_bill(_warehouse(), tmp_path / "bill.csv")
    res = ingest_focus_files(tmp_path / "lake", [made.path])
    assert sorted((r.provider, r.period_start.month) for r in res.runs) == [
        (p, m) for p in ("aws", "azure", "gcp") for m in (11, 12)]
    assert res.rows == made.node_lines + made.other_lines


def test_node_facts_fall_back_to_the_lake(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    rows = [{"snapshot_ts": START, "node": n, "provider": p, "provider_id": pid, "region": r, "zone": z}
            for c, n, _, _, _, _, p, pid, r, z in NODES if c == "prod-aws"]
    LakeWriter(lake).write("k8s_nodes", rows, source="t", cluster="prod-aws", window_start=START, window_end=START + timedelta(days=1))
    made = write_demo_bill(_warehouse(with_dim=False), tmp_path / "bill.csv", lake_dir=lake)
    ids = {r["ResourceId"] for r in read_focus_file(made.path).table.to_pylist() if r["ServiceCategory"] == "Compute"}
    # AWS nodes resolved from the lake; the others have no facts and are billed under their node name.
    assert {"i-0aaa000000000001", "i-0aaa000000000002", "gke-a2-node-1", "aks-t4-vmss000000"} == ids


def test_node_facts_from_int_nodes_hourly(tmp_path: Path) -> None:
    con = _warehouse(with_dim=False)
    con.execute("create table int_nodes_hourly (hour timestamptz, cluster varchar, node varchar, provider_id varchar, provider varchar)")
    con.executemany("insert into int_nodes_hourly values (?, ?, ?, ?, ?)",
                    [(START, c, n, pid, p) for c, n, _, _, _, _, p, pid, _, _ in NODES])
    made = write_demo_bill(con, tmp_path / "bill.csv")
    rows = [r for r in read_focus_file(made.path).table.to_pylist() if r["ServiceCategory"] == "Compute"]
    assert {r["ResourceId"] for r in rows if r["ProviderName"] == "Amazon Web Services"} == {"i-0aaa000000000001", "i-0aaa000000000002"}
    assert {r["ProviderName"] for r in rows} == {"Amazon Web Services", "Google Cloud", "Microsoft"}
