"""``POST /v1/clusters/{cluster}/whatif`` on the dbt-built fleet fixture: role check, unknown
cluster, the result's shape, its price and its storage."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpufinops.warehouse import connect

_spec = importlib.util.spec_from_file_location("api_support_w", Path(__file__).parent / "fixtures/api/support.py")
assert _spec and _spec.loader
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)


@pytest.fixture()
def client(fleet_copy):
    from api.auth import TokenStore
    from gpufinops.appdb import open_app_db

    home = fleet_copy.home
    open_app_db(f"sqlite:///{home / 'app.db'}")
    store = TokenStore(home / "api-tokens.yaml")
    tokens = {"admin": store.create("admin", ["platform-admin"]), "finance": store.create("finance", ["finance"])}
    with TestClient(support.make_app(fleet_copy.settings)) as c:
        yield c, tokens, fleet_copy


def test_whatif_needs_platform_admin_and_a_known_cluster(client):
    c, tokens, _ = client
    assert c.post("/v1/clusters/x/whatif", json={}, headers=support.bearer(tokens["finance"])).status_code == 403
    assert c.post("/v1/clusters/nope/whatif", json={}, headers=support.bearer(tokens["admin"])).status_code == 404
    assert c.get("/v1/clusters/nope/whatif", headers=support.bearer(tokens["admin"])).status_code == 404


def test_whatif_result_is_priced_and_stored(client):
    c, tokens, fleet = client
    with connect(fleet.warehouse) as con:
        cluster = con.execute("select cluster from dim_node where gpu_capacity > 0 order by cluster limit 1").fetchone()[0]
    h = support.bearer(tokens["admin"])
    r = c.post(f"/v1/clusters/{cluster}/whatif", json={"policy": "fgd", "baseline_policy": "random", "seeds": 2,
                                                       "window": "7d"}, headers=h)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["cluster"] == cluster and d["pods"] > 0
    for side in ("baseline", "scenario"):
        assert set(d[side]) >= {"policy", "gpus", "nodes", "final_alloc_pct", "frag_pct_capacity", "seeds",
                                "alloc_curve"}
        assert d[side]["seeds"] == 2 and 0 <= d[side]["final_alloc_pct"] <= 100
    assert d["usd_per_gpu_hour"] > 0
    # GPUs freed are shown to 2 decimals and the rate to 4; the price uses the unrounded ones, so
    # it may differ by up to half a unit of each rounding (times 730 h)
    slack = (0.005 * d["usd_per_gpu_hour"] + 0.00005 * abs(d["gpus_freed"])) * 730 + 0.01
    assert d["monthly_savings_usd"] == pytest.approx(d["gpus_freed"] * d["usd_per_gpu_hour"] * 730, abs=slack)
    assert c.get(f"/v1/clusters/{cluster}/whatif", headers=h).json() == d
    assert (fleet.home / "whatif" / f"{cluster}.json").exists()
    bad = c.post(f"/v1/clusters/{cluster}/whatif", json={"policy": "nope"}, headers=h)
    assert bad.status_code == 400 and "nope" in bad.text
