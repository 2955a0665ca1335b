"""Price-list parsers: AWS offer (JSON and CSV), GCP catalog composition, Azure pages, own CSV."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpufinops.errors import InputError
from ingest.prices import get_parser, parse_price_file, parser_formats, records_to_table
from ingest.prices.gcp_shapes import GCE_SHAPES
from ingest.schema import get_table

FIX = Path(__file__).parent / "fixtures" / "prices"


def _by_key(records):
    return {(r.region, r.instance_type, r.capacity_type): r for r in records}


def test_registry_has_one_parser_per_format() -> None:
    assert parser_formats() == ["aws", "azure", "csv", "gcp"]
    with pytest.raises(InputError, match="unknown price format 'oracle'"):
        get_parser("oracle")


def test_aws_json_keeps_linux_shared_used_and_picks_no_upfront_reserved() -> None:
    recs = parse_price_file(FIX / "aws_ec2_offer.json", "aws")
    got = _by_key(recs)
    # Windows, dedicated tenancy, unused capacity reservations and SQL AMIs are skipped.
    assert set(got) == {
        ("us-east-1", "p4d.24xlarge", "on_demand"), ("us-east-1", "p4d.24xlarge", "reserved"),
        ("us-east-1", "g4dn.xlarge", "on_demand"), ("us-east-1", "g4dn.xlarge", "reserved"),
        ("eu-west-1", "g5.12xlarge", "on_demand"),  # no regionCode: mapped from the location name
    }
    assert got[("us-east-1", "g4dn.xlarge", "on_demand")].usd_per_hour == pytest.approx(0.526)
    # 1yr No Upfront wins over 1yr All Upfront and 3yr No Upfront.
    assert got[("us-east-1", "p4d.24xlarge", "reserved")].usd_per_hour == pytest.approx(19.2236)
    # Only a Partial Upfront term: hourly + upfront amortised over 8,760 h.
    assert got[("us-east-1", "g4dn.xlarge", "reserved")].usd_per_hour == pytest.approx(0.1580 + 1384 / 8760)
    p4d = got[("us-east-1", "p4d.24xlarge", "on_demand")]
    assert p4d.effective_from == datetime(2026, 11, 1, tzinfo=UTC) and p4d.effective_to is None
    assert p4d.gpu_usd_per_hour is None and p4d.currency == "USD" and p4d.source == "aws:aws_ec2_offer.json"


def test_aws_csv_form_equals_json_form() -> None:
    js = parse_price_file(FIX / "aws_ec2_offer.json", "aws")
    cs = parse_price_file(FIX / "aws_ec2_offer.csv", "aws")

    def strip(rs):
        return sorted((r.region, r.instance_type, r.capacity_type, round(r.usd_per_hour, 9), r.effective_from) for r in rs)

    assert strip(js) == strip(cs) and len(cs) == 5
    assert {r.source for r in cs} == {"aws:aws_ec2_offer.csv"}


def test_aws_region_filter_and_bad_price(tmp_path: Path) -> None:
    recs = parse_price_file(FIX / "aws_ec2_offer.json", "aws", regions=["eu-west-1"])
    assert [(r.region, r.instance_type) for r in recs] == [("eu-west-1", "g5.12xlarge")]
    doc = json.loads((FIX / "aws_ec2_offer.json").read_text())
    dim = next(iter(doc["terms"]["OnDemand"]["G4DNLINUX000001"]["G4DNLINUX000001.JRTCKXETXF"]["priceDimensions"].values()))
    dim["pricePerUnit"]["USD"] = "n/a"
    bad = tmp_path / "offer.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"G4DNLINUX000001\.JRTCKXETXF: price 'n/a' is not a number"):
        parse_price_file(bad, "aws")


def test_aws_csv_bad_price_names_sku_and_column(tmp_path: Path) -> None:
    text = (FIX / "aws_ec2_offer.csv").read_text()
    bad = tmp_path / "offer.csv"
    bad.write_text(text.replace('"0.5260000000"', '"n/a"'))
    with pytest.raises(InputError, match=r"SKU G4DNLINUX000001 term JRTCKXETXF, column PricePerUnit: price 'n/a'"):
        parse_price_file(bad, "aws")
    (tmp_path / "not_offer.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="not an AWS offer CSV"):
        parse_price_file(tmp_path / "not_offer.csv", "aws")


def _gcp_component_prices() -> dict[str, float]:
    """Component prices read straight from the fixture: description -> first price."""
    doc = json.loads((FIX / "gcp_compute_skus.json").read_text())
    out = {}
    for s in doc["skus"]:
        up = s["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]
        out[s["description"]] = int(up["units"]) + up["nanos"] / 1e9
    return out


def test_gcp_composes_machine_prices_from_components() -> None:
    c = _gcp_component_prices()
    first = datetime(2026, 10, 1, tzinfo=UTC)  # before the T4 price change of the fixture
    got = _by_key(r for r in parse_price_file(FIX / "gcp_compute_skus.json", "gcp") if r.effective_from == first)
    a2 = got[("us-central1", "a2-highgpu-8g", "on_demand")]
    shape = GCE_SHAPES["a2-highgpu-8g"]
    expected = (shape.vcpus * c["A2 Instance Core running in Americas"] + shape.memory_gib * c["A2 Instance Ram running in Americas"]
                + 8 * c["Nvidia Tesla A100 GPU running in Americas"])
    assert a2.usd_per_hour == pytest.approx(expected)
    assert a2.gpu_usd_per_hour == pytest.approx(c["Nvidia Tesla A100 GPU running in Americas"])
    assert got[("us-central1", "a2-highgpu-1g", "on_demand")].usd_per_hour == pytest.approx(3.673385, abs=1e-6)  # public list price
    spot = got[("us-east1", "a2-highgpu-1g", "spot")]
    assert spot.gpu_usd_per_hour == pytest.approx(c["Spot Preemptible Nvidia Tesla A100 GPU running in Americas"])
    assert spot.usd_per_hour < a2.usd_per_hour / 8
    assert ("us-central1", "a2-highgpu-1g", "reserved") in got  # Commit1Yr
    # N1 with attached T4s: named <type>+<n>x<accelerator>; N1 has no spot SKUs in the fixture.
    n1 = got[("us-central1", "n1-standard-32+4xnvidia-tesla-t4", "on_demand")]
    assert n1.gpu_usd_per_hour == pytest.approx(0.35)
    plain = got[("us-central1", "n1-standard-32", "on_demand")]
    assert plain.gpu_usd_per_hour is None
    assert n1.usd_per_hour == pytest.approx(plain.usd_per_hour + 4 * 0.35)
    assert ("us-central1", "n1-standard-32", "spot") not in got
    # V100 is not in the fixture, and 4 x T4 on a 1-vCPU host is fine but 8 x T4 is not a GCE shape.
    assert not any("v100" in k[1] or "8xnvidia-tesla-t4" in k[1] for k in got)
    # G2 is priced only where its SKUs exist.
    assert {k[0] for k in got if k[1].startswith("g2-")} == {"europe-west4"}


def test_gcp_price_change_splits_effective_windows() -> None:
    recs = [r for r in parse_price_file(FIX / "gcp_compute_skus.json", "gcp")
            if r.region == "us-central1" and r.instance_type == "n1-standard-8+1xnvidia-tesla-t4" and r.capacity_type == "on_demand"]
    recs.sort(key=lambda r: r.effective_from)
    change = datetime(2026, 11, 15, tzinfo=UTC)
    assert [(r.effective_from, r.effective_to) for r in recs] == [(datetime(2026, 10, 1, tzinfo=UTC), change), (change, None)]
    assert recs[0].usd_per_hour - recs[1].usd_per_hour == pytest.approx(0.05)
    assert [r.gpu_usd_per_hour for r in recs] == [pytest.approx(0.35), pytest.approx(0.30)]


def test_azure_follows_pages_and_classifies() -> None:
    recs = parse_price_file(FIX / "azure_retail-1.json", "azure")
    got = _by_key(recs)
    assert got[("eastus", "Standard_NC24ads_A100_v4", "on_demand")].usd_per_hour == pytest.approx(3.673)  # not the Windows 5.514
    assert got[("eastus", "Standard_NC24ads_A100_v4", "spot")].usd_per_hour == pytest.approx(1.1019)  # Spot over Low Priority
    assert got[("eastus", "Standard_NC24ads_A100_v4", "reserved")].usd_per_hour == pytest.approx(19306.0 / 8760)  # 1 Year term
    assert ("eastus", "Standard_NC64as_T4_v3", "spot") in got  # from page 3: the chain was followed to the end
    assert ("westeurope", "Standard_NC64as_T4_v3", "spot") not in got  # price 0
    assert not any(r.instance_type == "Standard_D4s_v5" for r in recs)  # storage item
    assert len(recs) == 7
    only_we = parse_price_file(FIX / "azure_retail-1.json", "azure", regions=["westeurope"])
    assert [(r.instance_type, r.usd_per_hour) for r in only_we] == [("Standard_ND96asr_v4", 29.92)]


def test_azure_page_link_loop_and_dead_link(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"Items": [], "NextPageLink": "b.json"}))
    (tmp_path / "b.json").write_text(json.dumps({"Items": [], "NextPageLink": "a.json"}))
    with pytest.raises(InputError, match="loop"):
        parse_price_file(tmp_path / "a.json", "azure")
    (tmp_path / "c.json").write_text(json.dumps({"Items": [], "NextPageLink": "https://prices.azure.com/api/retail/prices?$skip=100"}))
    with pytest.raises(InputError, match="no next page file"):
        parse_price_file(tmp_path / "c.json", "azure")


def test_own_csv_keeps_currency_and_converts_times() -> None:
    got = _by_key(parse_price_file(FIX / "own_prices.csv", "csv"))
    eur = got[("westeurope", "Standard_NC24ads_A100_v4", "on_demand")]
    assert eur.currency == "EUR" and not eur.is_usd
    g2 = got[("europe-west4", "g2-standard-48", "on_demand")]
    assert g2.effective_from == datetime(2026, 10, 31, 23, tzinfo=UTC) and g2.gpu_usd_per_hour == 0.62
    ri = got[("us-east-1", "p4d.24xlarge", "reserved")]
    assert ri.source == "contract:EDP-2026" and ri.effective_to == datetime(2027, 11, 1, tzinfo=UTC)
    assert got[("us-east-1", "g5.12xlarge", "spot")].source == "csv:own_prices.csv"
    table = records_to_table(list(got.values()))
    assert table.schema.equals(get_table("prices").schema) and table.num_rows == 4


@pytest.mark.parametrize(("line", "message"), [
    ("aws,us-east-1,p4d.24xlarge,ondemand,1.0,,USD,2026-11-01,,", r"line 2, column capacity_type: 'ondemand'"),
    ("aws,us-east-1,p4d.24xlarge,spot,-1,,USD,2026-11-01,,", r"line 2, column usd_per_hour: must be a price > 0"),
    ("aws,us-east-1,p4d.24xlarge,spot,1,,USD,yesterday,,", r"line 2, column effective_from: 'yesterday'"),
    ("aws,us-east-1,p4d.24xlarge,spot,1,,USD,2026-11-01,2026-10-01,", r"line 2, column effective_to: .* is not after"),
])
def test_own_csv_errors_name_line_and_column(tmp_path: Path, line: str, message: str) -> None:
    f = tmp_path / "p.csv"
    f.write_text("provider,region,instance_type,capacity_type,usd_per_hour,gpu_usd_per_hour,currency,effective_from,effective_to,source\n"
                 + line + "\n")
    with pytest.raises(InputError, match=message):
        parse_price_file(f, "csv")


def test_own_csv_rejects_unknown_columns_and_repeats(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text("provider,region,instance_type,capacity_type,usd_per_hour,effective_from,price_eur\n")
    with pytest.raises(InputError, match=r"unknown \['price_eur'\]"):
        parse_price_file(f, "csv")
    f.write_text("provider,region,instance_type,capacity_type,usd_per_hour,effective_from\n"
                 "aws,us-east-1,p5.48xlarge,on_demand,98.32,2026-11-01\naws,us-east-1,p5.48xlarge,on_demand,90,2026-11-01\n")
    with pytest.raises(InputError, match="line 3 repeats the price of line 2"):
        parse_price_file(f, "csv")


@pytest.mark.parametrize(("description", "usage", "expected"), [
    ("N2 Instance Core running in Americas", "OnDemand", ("n2", "cpu", "on_demand")),
    ("N2 Instance Ram running in EMEA", "Preemptible", ("n2", "ram", "spot")),
    ("Commitment v1: N2 Cpu in Americas for 1 Year", "Commit1Yr", ("n2", "cpu", "reserved")),
    ("Commitment v1: Ram in Americas for 1 Year", "Commit1Yr", ("n1", "ram", "reserved")),  # N1 commitments name no family
    ("Nvidia H100 80GB GPU running in Americas", "OnDemand", ("nvidia-h100-80gb", "gpu", "on_demand")),
    ("Nvidia Tesla A100 80GB GPU running in Americas", "OnDemand", ("nvidia-a100-80gb", "gpu", "on_demand")),
    ("N2 Custom Instance Core running in Americas", "OnDemand", None),
    ("Sole Tenancy Instance Core running in Americas", "OnDemand", None),
    ("A2 Instance Core running in Americas", "Commit3Yr", None),
])
def test_gcp_sku_classification(description: str, usage: str, expected: tuple | None) -> None:
    from ingest.prices.gcp import classify_sku

    comp = classify_sku({"description": description, "category": {"resourceFamily": "Compute", "usageType": usage}})
    assert (None if comp is None else (comp.key, comp.part, comp.capacity)) == expected


def test_azure_crawls_an_api_url_with_httpx(tmp_path: Path) -> None:
    import functools
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path)))
    base = f"http://127.0.0.1:{server.server_port}"
    pages = [json.loads((FIX / f"azure_retail-{n}.json").read_text()) for n in (1, 2, 3)]
    pages[0]["NextPageLink"], pages[1]["NextPageLink"] = f"{base}/p2.json", f"{base}/p3.json"
    for n, page in enumerate(pages, start=1):
        (tmp_path / f"p{n}.json").write_text(json.dumps(page))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        recs = parse_price_file(f"{base}/p1.json", "azure")
        with pytest.raises(InputError, match="HTTP 404"):
            parse_price_file(f"{base}/missing.json", "azure")
    finally:
        server.shutdown()
    assert len(recs) == 7 and {r.source for r in recs} == {"azure:p1.json"}
