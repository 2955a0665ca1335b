"""The API's endpoints over the mini warehouse + app DB: PRODUCT.md's five, showback, recommendations,
the change queue through apply/rollback against the replaying Kubernetes server, audit, health, metrics."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

_spec = importlib.util.spec_from_file_location("api_support", Path(__file__).parent / "fixtures/api/support.py")
assert _spec and _spec.loader
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)
bearer = support.bearer

from gpufinops.appdb.ids import workload_id  # noqa: E402

TRAIN_A = workload_id("c1", "alpha-train", "Job", "train-a")
SERVE_B = workload_id("c1", "beta-serve", "Deployment", "serve-b")
SATURDAY = datetime(2026, 11, 7, 12, 0, tzinfo=UTC)


@pytest.fixture()
def env(tmp_path: Path, mini_fleet: Any) -> Iterator[tuple[TestClient, dict[str, str], Any]]:
    settings, tokens = support.build_home(tmp_path, mini_fleet)
    app = support.make_app(settings, clock=lambda: SATURDAY)
    with TestClient(app) as client:
        yield client, tokens, app


def test_register_workload_defaults_to_the_callers_namespace_and_shares_the_id_space(env: Any) -> None:
    client, tokens, _ = env
    body = {"name": "api-b", "image": "ghcr.io/x/api:1", "cpu": 2, "mem_gb": 4, "min_replicas": 1,
            "max_replicas": 5, "scale_metric": "rps", "budget_usd_day": 50.123}
    r = client.post("/v1/workloads", json=body, headers=bearer(tokens["member-beta"]))
    assert r.status_code == 201, r.text
    wid = r.json()["workload_id"]
    assert wid == workload_id("c1", "beta-serve", "Deployment", "api-b")
    assert r.json()["namespace"] == "beta-serve" and r.json()["team"] == "beta"
    again = client.post("/v1/workloads", json=body, headers=bearer(tokens["member-beta"]))
    assert again.status_code == 409
    shown = client.get(f"/v1/workloads/{wid}", headers=bearer(tokens["lead-beta"])).json()
    assert shown["budget_usd_day"] == 50.12 and shown["version"] == 1
    # a discovered workload answers under the same deterministic id
    assert client.get(f"/v1/workloads/{SERVE_B}", headers=bearer(tokens["lead-beta"])).json()["discovered"] is True


def test_cost_of_a_discovered_workload_over_the_window(env: Any) -> None:
    client, tokens, _ = env
    r = client.get(f"/v1/workloads/{TRAIN_A}/cost?window=7d", headers=bearer(tokens["member-alpha"]))
    assert r.status_code == 200, r.text
    d = r.json()
    # train-a: 4 GPUs at 25% busy, $15.90/h, every one of the mini warehouse's 48 hours
    assert d["cost_usd"] == pytest.approx(48 * 15.9, abs=0.01)
    assert d["idle_pct"] == pytest.approx(0.75)
    assert d["gpu_hours"] == pytest.approx(192.0)
    assert d["window_end"].startswith("2026-11-03T00:00:00")
    assert set(d["rightsizing"]) >= {"cpu", "mem_gb"}
    assert [g["recommendation_id"] for g in d["rightsizing"]["gpu"]] == ["rec_a2"]  # rec_old is resolved
    day = client.get(f"/v1/workloads/{TRAIN_A}/cost?window=24h", headers=bearer(tokens["finance"])).json()
    assert day["cost_usd"] == pytest.approx(24 * 15.9, abs=0.01)
    bad = client.get(f"/v1/workloads/{TRAIN_A}/cost?window=7x", headers=bearer(tokens["finance"]))
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")


def test_autoscaling_bumps_the_version_and_proposes_a_change(env: Any) -> None:
    client, tokens, _ = env
    h = bearer(tokens["member-beta"])
    r1 = client.put(f"/v1/workloads/{SERVE_B}/autoscaling", json={"min": 1, "max": 4, "target_rps": 50,
                                                                   "ticket": "COST-7"}, headers=h)
    assert r1.status_code == 200, r1.text
    r2 = client.put(f"/v1/workloads/{SERVE_B}/autoscaling", json={"min": 2, "max": 6, "target_rps": 80,
                                                                   "ticket": "COST-8"}, headers=h)
    assert (r1.json()["version"], r2.json()["version"]) == (1, 2)
    change = client.get(f"/v1/changes/{r2.json()['change_id']}", headers=h).json()
    assert change["kind"] == "set_autoscaling" and change["target_kind"] == "HorizontalPodAutoscaler"
    assert change["target_name"] == "serve-b" and change["proposed"]["max_replicas"] == 6
    assert change["status"] == "proposed" and change["team"] == "beta"
    # PRODUCT's exact body (no ticket) still records the version; the policy's ticket gate says why no change
    r3 = client.put(f"/v1/workloads/{SERVE_B}/autoscaling", json={"min": 1, "max": 3, "target_rps": 10}, headers=h)
    assert r3.status_code == 200 and r3.json()["version"] == 3 and r3.json()["change_id"] is None
    assert "ticket" in r3.json()["change_skipped"]


def test_rightsizing_apply_validates_the_ticket_and_returns_202(env: Any) -> None:
    client, tokens, _ = env
    h = bearer(tokens["member-beta"])
    bad = client.post(f"/v1/workloads/{SERVE_B}/rightsizing:apply", json={"cpu": 1.5, "mem_gb": 3, "ticket": "fix"},
                      headers=h)
    assert bad.status_code == 422 and bad.json()["gate"] == "ticket"
    r = client.post(f"/v1/workloads/{SERVE_B}/rightsizing:apply",
                    json={"cpu": 1.5, "mem_gb": 3, "ticket": "COST-42"}, headers=h)
    assert r.status_code == 202, r.text
    cid = r.json()["change_id"]
    assert cid.startswith("chg_")
    change = client.get(f"/v1/changes/{cid}", headers=h).json()
    assert change["kind"] == "rightsize_cpu_mem" and change["proposed"]["cpu"] == 1.5
    assert change["ticket"] == "COST-42" and change["target_kind"] == "Deployment"
    # a Notebook is not a patchable workload kind
    nb = workload_id("c1", "alpha-train", "Notebook", "notebook-a")
    r = client.post(f"/v1/workloads/{nb}/rightsizing:apply", json={"cpu": 1, "mem_gb": 1, "ticket": "COST-1"},
                    headers=bearer(tokens["lead-alpha"]))
    assert r.status_code == 422


def test_binpack_of_a_cluster(env: Any) -> None:
    client, tokens, _ = env
    d = client.get("/v1/clusters/c1/binpack", headers=bearer(tokens["admin"])).json()
    # mini_lake: shapes {4, 1, 2 GPUs} at 1/3 each; only n1's 3 free GPUs strand the 4-GPU shape ->
    # 3 × 1/3 = 1 GPU of the 9 free (the fragmentation formula of fct_cluster_capacity_hourly)
    assert d["fragmentation"] == pytest.approx(1.0 / 9.0, abs=1e-4)
    assert d["suggested_moves"] == 1 and d["nodes_lower_bound"] == 1 and d["gpu_capacity"] == 16.0
    assert client.get("/v1/clusters/nope/binpack", headers=bearer(tokens["admin"])).status_code == 404
    assert client.get("/v1/clusters/c1/binpack", headers=bearer(tokens["lead-alpha"])).status_code == 403


def test_showback_is_scoped_and_adds_up(env: Any) -> None:
    client, tokens, _ = env
    q = "/v1/showback?from=2026-11-01&to=2026-11-02&group_by=team"
    everything = client.get(q, headers=bearer(tokens["finance"])).json()
    assert everything["total_chargeback_usd"] == pytest.approx(support.dash.NODE_COST + support.dash.OVERHEAD,
                                                               abs=0.05)
    alpha = client.get(q, headers=bearer(tokens["lead-alpha"])).json()
    assert [line["team"] for line in alpha["lines"]] == ["alpha"]
    assert alpha["total_chargeback_usd"] == pytest.approx(support.dash.ALPHA_CHARGEBACK, abs=0.01)
    ns = client.get(q.replace("team", "namespace"), headers=bearer(tokens["member-beta"])).json()
    assert {line["namespace"] for line in ns["lines"]} == {"beta-serve"}


def test_recommendations_list_show_and_propose(env: Any) -> None:
    client, tokens, _ = env
    mine = client.get("/v1/recommendations", headers=bearer(tokens["lead-alpha"])).json()
    assert {r["id"] for r in mine["items"]} == {"rec_a1", "rec_a2"}
    every = client.get("/v1/recommendations?status=all", headers=bearer(tokens["admin"])).json()
    assert {r["id"] for r in every["items"]} == {"rec_a1", "rec_a2", "rec_b1", "rec_p1", "rec_old"}
    assert client.get("/v1/recommendations?kind=consolidate_nodes", headers=bearer(tokens["finance"])).json()[
        "total"] == 1
    r = client.post("/v1/recommendations/rec_a2/change", json={"ticket": "COST-3"},
                    headers={**bearer(tokens["member-alpha"]), "Idempotency-Key": "k-1"})
    assert r.status_code == 201, r.text
    replay = client.post("/v1/recommendations/rec_a2/change", json={"ticket": "COST-3"},
                         headers={**bearer(tokens["member-alpha"]), "Idempotency-Key": "k-1"})
    assert replay.json()["id"] == r.json()["id"] and replay.headers.get("idempotent-replayed") == "true"
    other = client.post("/v1/recommendations/rec_a2/change", json={"ticket": "COST-4"},
                        headers={**bearer(tokens["member-alpha"]), "Idempotency-Key": "k-1"})
    assert other.status_code == 409
    assert len(client.get("/v1/changes", headers=bearer(tokens["admin"])).json()["items"]) == 1


def test_change_lifecycle_through_apply_and_rollback_against_the_replay_server(tmp_path: Path, mini_fleet: Any) -> None:
    from kube_replay import KubeReplay

    from controller.kube import KubeClient, KubeSettings

    hpa = "/apis/autoscaling/v2/namespaces/ml-serving/horizontalpodautoscalers/llm-api"
    settings, tokens = support.build_home(tmp_path, mini_fleet)
    with KubeReplay() as kube:
        app = support.make_app(settings, clock=lambda: SATURDAY, kube_factory=lambda: KubeClient(
            kube.api_client(), settings=KubeSettings(backoff_base_s=0.01), sleep=lambda s: None))
        before = kube.get(hpa)
        assert before is not None
        with TestClient(app) as client:
            admin, admin2 = bearer(tokens["admin"]), bearer(tokens["admin2"])
            wl = client.post("/v1/workloads", headers=admin, json={
                "name": "llm-api", "image": "x/llm:1", "cpu": 4, "mem_gb": 16, "min_replicas": 1, "max_replicas": 4,
                "scale_metric": "rps", "budget_usd_day": 100, "namespace": "ml-serving", "cluster": "prod"})
            assert wl.status_code == 201, wl.text
            put = client.put(f"/v1/workloads/{wl.json()['workload_id']}/autoscaling", headers=admin,
                             json={"min": 2, "max": 7, "target_rps": 30, "ticket": "COST-9"})
            cid = put.json()["change_id"]
            # four-eyes: the requester may not approve
            own = client.post(f"/v1/changes/{cid}:approve", json={"reason": "mine"}, headers=admin)
            assert own.status_code == 409 and own.json()["gate"] == "four_eyes"
            assert client.post(f"/v1/changes/{cid}:approve", json={"reason": "ok"}, headers=admin2).status_code == 200
            dry = client.post(f"/v1/changes/{cid}:apply", json={"dry_run": True}, headers=admin)
            assert dry.status_code == 200, dry.text
            assert dry.json()["plan"] and kube.writes(dry_run=False) == []
            done = client.post(f"/v1/changes/{cid}:apply", json={}, headers=admin)
            assert done.status_code == 200, done.text
            assert done.json()["status"] == "verified"
            live = kube.get(hpa)
            assert live is not None and live["spec"]["maxReplicas"] == 7 and live["spec"]["minReplicas"] == 2
            back = client.post(f"/v1/changes/{cid}:rollback", json={"reason": "too many"}, headers=admin2)
            assert back.status_code == 200 and back.json()["status"] == "rolled_back"
            restored = kube.get(hpa)
            assert restored is not None and restored["spec"]["maxReplicas"] == before["spec"]["maxReplicas"]
            audit = client.get(f"/v1/audit?change_id={cid}", headers=admin).json()["items"]
            assert [e["action"] for e in audit][:3] == ["propose", "refused", "approve"]  # refusals are audited
            assert audit[-1]["to_status"] == "rolled_back"
            assert client.get("/v1/audit/verify", headers=admin).json()["ok"] is True


def test_health_and_metrics(env: Any, mini_fleet: Any) -> None:
    client, tokens, _ = env
    # the version the dbt build published (the live link's target), copied with the home
    version = Path(os.readlink(mini_fleet.warehouse)).stem
    assert client.get("/healthz").json() == {"status": "ok", "app_db": "ok", "warehouse": "ok",
                                             "warehouse_version": version}
    client.get(f"/v1/workloads/{TRAIN_A}/cost", headers=bearer(tokens["finance"]))
    client.get("/v1/workloads/wl_000000000000/cost", headers=bearer(tokens["finance"]))
    text = client.get("/metrics").text
    assert 'gpufinops_api_requests_total{method="GET",route="/v1/workloads/{workload_id}/cost",status="200"} 1' in text
    assert 'route="/v1/workloads/{workload_id}/cost",status="404"} 1' in text
    assert "wl_000000000000" not in text  # route templates, never raw ids
    assert 'gpufinops_api_request_duration_seconds_bucket{method="GET",route="/v1/workloads/{workload_id}/cost",le="+Inf"} 2' in text


def test_openapi_lists_the_product_paths(env: Any) -> None:
    client, _, _ = env
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/v1/workloads", "/v1/workloads/{workload_id}/autoscaling", "/v1/workloads/{workload_id}/cost",
              "/v1/workloads/{workload_id}/rightsizing:apply", "/v1/clusters/{cluster}/binpack"):
        assert p in paths
