"""The FOCUS 1.3 allocation export (fct_focus_allocation_daily + `gpufinops export focus`), on the fleet.

The fleet has a FOCUS bill for its day: node lines are split over namespaces and workloads, the
storage / NAT / support lines pass through.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cli.main import app
from exports.focus import COLUMNS, TAG_PREFIX
from ingest.focus.spec import MANDATORY

DAY = "2026-11-01"


def _cli(home: Path, *args: str):
    return CliRunner().invoke(app, ["--home", str(home), *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def export_csv(fleet, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("focus") / "focus.csv"
    res = _cli(fleet.home, "export", "focus", "--start", DAY, "--end", DAY, "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "FOCUS 1.3 export" in res.output
    return out


def _rows(path: Path) -> list[dict]:
    con = duckdb.connect()
    cur = con.execute(f"select * from read_csv('{path}', all_varchar=true, header=true)")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def test_every_origin_charge_splits_to_ratio_one_and_its_amounts(fleet):
    con = duckdb.connect(str(fleet.warehouse), read_only=True)
    rows = con.execute(
        """select origin_charge_id, sum(allocated_ratio), sum(billed_cost), max(origin_billed_cost),
                  sum(effective_cost), max(origin_effective_cost), count(*)
           from fct_focus_allocation_daily where row_kind <> 'passthrough' group by 1"""
    ).fetchall()
    assert len(rows) >= 10  # one per node line of the bill
    for charge, ratio, billed, origin_billed, eff, origin_eff, n in rows:
        assert n >= 2, charge  # at least one workload and the unallocated remainder
        assert abs(ratio - 1) <= 1e-9, charge
        assert abs(billed - origin_billed) <= 1e-9, charge
        assert abs(eff - origin_eff) <= 1e-9, charge
    # every node-day has exactly one unallocated remainder per origin charge, with no resource
    bad = con.execute(
        """select origin_charge_id from fct_focus_allocation_daily where row_kind <> 'passthrough'
           group by 1 having count(*) filter (where row_kind = 'unallocated') <> 1"""
    ).fetchall()
    assert bad == []
    # one allocated row per (origin charge, namespace, workload)
    dupes = con.execute(
        """select origin_charge_id, namespace, workload_kind, workload, count(*) from fct_focus_allocation_daily
           where row_kind = 'allocated' group by 1, 2, 3, 4 having count(*) > 1"""
    ).fetchall()
    assert dupes == []
    # the shared namespaces hand their share on (proportional is the default setting)
    shared = con.execute(
        "select count(*) from fct_focus_allocation_daily where row_kind = 'allocated' and namespace in ('kube-system', 'monitoring', 'gpu-operator')"
    ).fetchone()[0]
    assert shared == 0
    assert con.execute("select count(*) from fct_focus_allocation_daily where row_kind = 'shared'").fetchone()[0] > 0


def test_export_adds_up_to_the_bill_and_passes_other_lines_through(fleet, export_csv):
    rows = _rows(export_csv)
    lake = fleet.home / "lake" / "billing_focus"
    bill = duckdb.connect().execute(
        f"""select "BilledCost", "EffectiveCost", "ResourceId", "ServiceName"
            from read_parquet('{lake}/**/*.parquet') where cast("ChargePeriodStart" as date) = date '{DAY}'"""
    ).fetchall()
    assert bill
    billed = sum(float(r["BilledCost"]) for r in rows)
    effective = sum(float(r["EffectiveCost"]) for r in rows)
    assert billed == pytest.approx(sum(b[0] for b in bill), abs=1e-6)
    assert effective == pytest.approx(sum(b[1] for b in bill), abs=1e-6)
    # lines of no node (storage, NAT, support): one row each, unchanged, no allocation
    passthrough = [r for r in rows if r["AllocatedMethodId"] is None]
    assert passthrough and all(r["AllocatedMethodDetails"] is None and r["AllocatedTags"] is None for r in passthrough)
    node_ids = {r["ResourceId"] for r in rows if r["AllocatedMethodId"] is not None}
    others = sorted((b[2] or "", round(b[0], 9)) for b in bill if b[2] not in node_ids)
    assert sorted((r["ResourceId"] or "", round(float(r["BilledCost"]), 9)) for r in passthrough) == others


def test_rows_carry_focus_13_columns_and_allocation_details(export_csv):
    rows = _rows(export_csv)
    header = set(rows[0])
    assert set(MANDATORY["1.3"]) <= header
    assert {"HostProviderName", "AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId",
            "AllocatedResourceName", "AllocatedTags"} <= header
    split = [r for r in rows if r["AllocatedMethodId"] is not None]
    by_charge: dict[str, float] = {}
    units = set()
    for r in split:
        details = json.loads(r["AllocatedMethodDetails"])
        ratio = sum(e["AllocatedRatio"] for e in details["Elements"])
        by_charge[r["x_OriginChargeId"]] = by_charge.get(r["x_OriginChargeId"], 0.0) + ratio
        units |= {e.get("UsageUnit") for e in details["Elements"]}
        kind = details["x_RowKind"]
        if kind == "unallocated":
            assert r["AllocatedResourceId"] is None and r["AllocatedResourceName"] is None
        else:
            assert r["AllocatedResourceId"].startswith("k8s://") and r["AllocatedResourceName"]
            tags = json.loads(r["AllocatedTags"])
            own = json.loads(r["Tags"]) if r["Tags"] else {}
            assert not set(tags) & set(own)
            assert f"{TAG_PREFIX}namespace" in tags and f"{TAG_PREFIX}workload" in tags
    # the elements of all the allocated charges of an origin charge sum to 1 (FOCUS AllocatedRatio)
    assert all(abs(v - 1) < 1e-9 for v in by_charge.values())
    assert {"GPU-Hours", "vCPU-Hours", "GiB-Hours"} <= units


def test_reingesting_the_export_keeps_every_row_and_the_totals(export_csv, tmp_path):
    home = tmp_path / "re"
    res = _cli(home, "ingest", "billing", "--focus", str(export_csv))
    assert res.exit_code == 0, res.output
    assert "FOCUS 1.3" in res.output
    landed = duckdb.connect().execute(
        f"""select count(*), sum("BilledCost"), sum("EffectiveCost")
            from read_parquet('{home}/lake/billing_focus/**/*.parquet')"""
    ).fetchone()
    rows = _rows(export_csv)
    assert landed[0] == len(rows)
    assert landed[1] == pytest.approx(sum(float(r["BilledCost"]) for r in rows), abs=1e-6)
    assert landed[2] == pytest.approx(sum(float(r["EffectiveCost"]) for r in rows), abs=1e-6)


def test_parquet_export_is_typed(fleet, tmp_path):
    out = tmp_path / "focus.parquet"
    res = _cli(fleet.home, "export", "focus", "--start", DAY, "--end", DAY, "--out", str(out))
    assert res.exit_code == 0, res.output
    table = pq.read_table(out)
    assert table.column_names == [c[0] for c in COLUMNS]
    assert str(table.schema.field("ChargePeriodStart").type) == "timestamp[us, tz=UTC]"
    assert table.schema.field("BilledCost").type == "double"


def test_empty_range_writes_nothing_and_keeps_an_existing_file(fleet, tmp_path):
    out = tmp_path / "focus.csv"
    out.write_text("previous export\n")
    res = _cli(fleet.home, "export", "focus", "--start", "2027-01-01", "--end", "2027-01-31", "--out", str(out))
    assert res.exit_code != 0
    assert "no charges from 2027-01-01 to 2027-01-31" in res.output
    assert out.read_text() == "previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["focus.csv"]  # no temporary file left
    res = _cli(fleet.home, "export", "focus", "--start", DAY, "--end", DAY, "--out", str(out))
    assert res.exit_code == 0
    assert out.read_text().startswith('"BilledCost"')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["focus.csv"]
    res = _cli(fleet.home, "export", "focus", "--start", DAY, "--end", "2026-10-01", "--out", str(out))
    assert res.exit_code != 0 and "before" in res.output


def test_api_export_is_finance_only(fleet_copy):
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.auth import TokenStore
    from api.config import ApiSettings
    from gpufinops.settings import Settings

    store = TokenStore(fleet_copy.home / "api-tokens.yaml")
    fin = store.create("fin", ["finance"])
    member = store.create("dev", ["member:retrieval"])
    settings = Settings(home=fleet_copy.home)
    with TestClient(create_app(settings, api_settings=ApiSettings())) as client:
        ok = client.get(f"/v1/exports/focus?start={DAY}&end={DAY}", headers={"Authorization": f"Bearer {fin}"})
        assert ok.status_code == 200, ok.text
        assert ok.headers["content-type"].startswith("text/csv")
        assert ok.text.startswith('"BilledCost"') and "gpufinops/node-cost-share/v1" in ok.text
        denied = client.get(f"/v1/exports/focus?start={DAY}&end={DAY}", headers={"Authorization": f"Bearer {member}"})
        assert denied.status_code == 403
        empty = client.get("/v1/exports/focus?start=2027-01-01&end=2027-01-02", headers={"Authorization": f"Bearer {fin}"})
        assert empty.status_code == 400 and "no charges" in empty.text


def test_without_a_bill_node_days_and_overhead_are_computed_charges(fleet_copy, tmp_path):
    import shutil

    home = fleet_copy.home
    shutil.rmtree(home / "lake" / "billing_focus")
    res = CliRunner().invoke(app, ["--home", str(home), "build", "--select", "stg_billing__focus+", "--no-summary"],
                             env={"GPUFINOPS_COST__SHARED_COST_METHOD": "even"}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    con = duckdb.connect(str(fleet_copy.warehouse), read_only=True)
    origins = dict(con.execute("select charge_origin, count(*) from fct_focus_allocation_daily group by 1").fetchall())
    assert set(origins) == {"computed"}
    node_cost = con.execute("select sum(node_cost_usd) from fct_node_hourly").fetchone()[0]
    overhead = con.execute("select sum(direct_cost_usd) from fct_showback_daily where namespace = '(overhead)'").fetchone()[0]
    assert overhead > 0
    total = con.execute("select sum(effective_cost) from fct_focus_allocation_daily").fetchone()[0]
    assert total == pytest.approx(node_cost + overhead, abs=1e-6)
    methods = {m for (m,) in con.execute("select distinct allocated_method_id from fct_focus_allocation_daily").fetchall()}
    assert methods == {"gpufinops/node-cost-share/v1", "gpufinops/shared-even/v1", "gpufinops/overhead-even/v1"}
    # even: every recipient of one origin charge gets the same share of the shared namespaces' ratio
    spread = con.execute(
        """select max(n) from (select origin_charge_id, count(distinct round(allocated_ratio, 12)) as n
           from fct_focus_allocation_daily where row_kind = 'shared' group by 1)"""
    ).fetchone()[0]
    assert spread == 1
    bad = con.execute(
        """select count(*) from (select origin_charge_id, sum(allocated_ratio) r, sum(effective_cost) e,
                  max(origin_effective_cost) o from fct_focus_allocation_daily group by 1)
           where abs(r - 1) > 1e-9 or abs(e - o) > 1e-9"""
    ).fetchone()[0]
    assert bad == 0
    con.close()
    out = tmp_path / "computed.csv"
    res = _cli(home, "export", "focus", "--start", DAY, "--end", DAY, "--out", str(out))
    assert res.exit_code == 0, res.output
    rows = _rows(out)
    assert {r["x_ChargeOrigin"] for r in rows} == {"computed"}
    assert any("no FOCUS bill is loaded" in r["ChargeDescription"] for r in rows)
