"""Who may do what: the role x endpoint matrix, tenant isolation (another team's id is 404, never its
data), the change gates over HTTP, and bad input (invalid JSON, wrong types, oversized bodies,
SQL-looking filters) answered with a clear 4xx and no state change."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

_spec = importlib.util.spec_from_file_location("api_support", Path(__file__).parent / "fixtures/api/support.py")
assert _spec and _spec.loader
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)
bearer = support.bearer

from gpufinops.appdb.ids import workload_id  # noqa: E402

TRAIN_A = workload_id("c1", "alpha-train", "Job", "train-a")
SERVE_B = workload_id("c1", "beta-serve", "Deployment", "serve-b")
WEDNESDAY = datetime(2026, 11, 4, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, mini_fleet: Any) -> Iterator[tuple[TestClient, dict[str, str], Any]]:
    settings, tokens = support.build_home(tmp_path_factory.mktemp("iso"), mini_fleet)
    app = support.make_app(settings, clock=lambda: WEDNESDAY)
    with TestClient(app) as client:
        yield client, tokens, app


def _counts(app: Any) -> dict[str, int]:
    with app.state.ctx.engine.connect() as conn:
        return {t: int(conn.execute(sa.text(f"select count(*) from {t}")).scalar_one())
                for t in ("changes", "approvals", "audit_log", "workloads", "idempotency_keys")}


# (method, path, body) -> expected status per token; "-" = no token
_WL = {"name": "x1", "image": "i:1", "cpu": 1, "mem_gb": 1, "min_replicas": 1, "max_replicas": 2,
       "scale_metric": "rps", "budget_usd_day": 1, "namespace": "alpha-train"}
MATRIX: list[tuple[str, str, Any, dict[str, int]]] = [
    ("GET", f"/v1/workloads/{TRAIN_A}/cost", None,
     {"-": 401, "admin": 200, "finance": 200, "lead-alpha": 200, "member-alpha": 200, "lead-beta": 404,
      "member-beta": 404}),
    ("GET", "/v1/clusters/c1/binpack", None,
     {"-": 401, "admin": 200, "finance": 200, "lead-alpha": 403, "member-beta": 403}),
    ("GET", "/v1/showback", None, {"-": 401, "admin": 200, "finance": 200, "member-beta": 200}),
    ("GET", "/v1/recommendations/rec_a1", None,
     {"-": 401, "admin": 200, "finance": 200, "member-alpha": 200, "lead-beta": 404}),
    ("GET", "/v1/recommendations/rec_p1", None, {"admin": 200, "finance": 200, "lead-alpha": 404}),
    ("PUT", f"/v1/workloads/{TRAIN_A}/autoscaling", {"min": 1, "max": 2},
     {"-": 401, "finance": 403, "lead-beta": 404, "member-beta": 404}),
    ("POST", f"/v1/workloads/{TRAIN_A}/rightsizing:apply", {"cpu": 1, "mem_gb": 1, "ticket": "COST-1"},
     {"-": 401, "finance": 403, "lead-beta": 404}),
    ("POST", "/v1/workloads", _WL, {"-": 401, "finance": 403, "member-beta": 404, "lead-beta": 404}),
    ("POST", "/v1/recommendations/rec_a1/change", {"ticket": "COST-1"}, {"finance": 403, "member-beta": 404}),
    ("GET", "/v1/audit/verify", None, {"admin": 200, "finance": 403, "lead-alpha": 403}),
    ("GET", "/v1/changes", None, {"-": 401, "admin": 200, "finance": 200, "member-beta": 200}),
    ("GET", "/healthz", None, {"-": 200}),
    ("GET", "/metrics", None, {"-": 200}),
]


@pytest.mark.parametrize(("method", "path", "body", "expected"), MATRIX, ids=[f"{m} {p}" for m, p, _, _ in MATRIX])
def test_role_endpoint_matrix(env: Any, method: str, path: str, body: Any, expected: dict[str, int]) -> None:
    client, tokens, app = env
    for who, status in expected.items():
        before = _counts(app)
        headers = {} if who == "-" else bearer(tokens[who])
        r = client.request(method, path, json=body, headers=headers)
        assert r.status_code == status, (who, r.text)
        if status >= 400:
            assert r.headers["content-type"].startswith("application/problem+json")
            assert r.json()["detail"]
            assert _counts(app) == before, f"{who} changed state with a {status}"
        if status == 401:
            assert r.headers["www-authenticate"].startswith("Bearer")


def test_another_teams_objects_are_404_and_reveal_nothing(env: Any) -> None:
    client, tokens, _ = env
    beta = bearer(tokens["lead-beta"])
    r = client.get(f"/v1/workloads/{TRAIN_A}/cost", headers=beta)
    unknown = client.get("/v1/workloads/wl_0123456789ab/cost", headers=beta)
    assert r.status_code == unknown.status_code == 404
    assert "train-a" not in r.text and "alpha" not in r.text
    assert r.json()["detail"].replace(TRAIN_A, "X") == unknown.json()["detail"].replace("wl_0123456789ab", "X")
    # lists leave the other team out entirely
    assert all(w["team"] == "beta" for w in client.get("/v1/workloads", headers=beta).json()["items"])
    assert {r["id"] for r in client.get("/v1/recommendations", headers=beta).json()["items"]} == {"rec_b1"}
    showback = client.get("/v1/showback?from=2026-11-01&to=2026-11-02&group_by=namespace", headers=beta).json()
    assert {line["team"] for line in showback["lines"]} == {"beta"}


def test_changes_of_another_team_cannot_be_seen_or_decided(env: Any) -> None:
    client, tokens, app = env
    r = client.post(f"/v1/workloads/{TRAIN_A}/rightsizing:apply", json={"cpu": 1, "mem_gb": 2, "ticket": "COST-5"},
                    headers=bearer(tokens["member-alpha"]))
    assert r.status_code == 202
    cid = r.json()["change_id"]
    before = _counts(app)
    for verb, body in ((":approve", {"reason": "x"}), (":reject", {"reason": "x"}), (":apply", {}),
                       (":rollback", {"reason": "x"})):
        assert client.post(f"/v1/changes/{cid}{verb}", json=body, headers=bearer(tokens["lead-beta"])).status_code == 404
    assert client.get(f"/v1/changes/{cid}", headers=bearer(tokens["member-beta"])).status_code == 404
    assert client.get(f"/v1/audit?change_id={cid}", headers=bearer(tokens["member-beta"])).status_code == 404
    assert cid not in client.get("/v1/audit", headers=bearer(tokens["member-beta"])).text
    assert _counts(app) == before
    # a member of the team sees it but may not approve (needs the team lead): 403 naming the role
    denied = client.post(f"/v1/changes/{cid}:approve", json={"reason": "x"}, headers=bearer(tokens["admin"]))
    assert denied.status_code == 403 and "team-lead:alpha" in denied.json()["detail"]


def test_self_approval_is_refused_and_apply_without_a_cluster_is_503(env: Any) -> None:
    client, tokens, app = env
    lead, lead2 = bearer(tokens["lead-alpha"]), bearer(tokens["lead-alpha2"])
    cid = client.post(f"/v1/workloads/{TRAIN_A}/rightsizing:apply", json={"cpu": 2, "mem_gb": 2, "ticket": "COST-6"},
                      headers=lead).json()["change_id"]
    own = client.post(f"/v1/changes/{cid}:approve", json={"reason": "mine"}, headers=lead)
    assert own.status_code == 409 and own.json()["gate"] == "four_eyes"
    assert client.get(f"/v1/changes/{cid}", headers=lead).json()["status"] == "proposed"
    assert client.post(f"/v1/changes/{cid}:approve", json={"reason": "ok"}, headers=lead2).status_code == 200
    again = client.post(f"/v1/changes/{cid}:approve", json={"reason": "ok"}, headers=bearer(tokens["admin"]))
    assert again.status_code in (403, 409)
    # no kubeconfig on this machine: a clear 503, and the change stays approved
    r = client.post(f"/v1/changes/{cid}:apply", json={}, headers=lead)
    assert r.status_code == 503 and "Kubernetes" in r.json()["detail"]
    assert client.get(f"/v1/changes/{cid}", headers=lead).json()["status"] == "approved"


def test_window_and_blast_radius_gates_refuse_apply_before_any_write(tmp_path: Path, mini_fleet: Any) -> None:
    from kube_replay import KubeReplay

    from changes.model import Actor
    from controller.kube import KubeClient, KubeSettings

    settings, tokens = support.build_home(tmp_path, mini_fleet)
    admin, admin2 = bearer(tokens["admin"]), bearer(tokens["admin2"])
    with KubeReplay() as kube:
        app = support.make_app(settings, clock=lambda: WEDNESDAY, kube_factory=lambda: KubeClient(
            kube.api_client(), settings=KubeSettings(backoff_base_s=0.01), sleep=lambda s: None))
        svc = app.state.ctx.service
        root = Actor("admin", frozenset({"platform-admin"}))
        with TestClient(app) as client:
            # rightsize_cpu_mem may only be applied at weekends; the clock says Wednesday
            ch = svc.create(actor=root, kind="rightsize_cpu_mem", cluster="prod", namespace="ml-serving",
                            target_kind="Deployment", target_name="llm-api", current={}, proposed={"cpu": 1, "container": "llm-api"},
                            ticket="COST-11", evidence_at=WEDNESDAY)
            assert client.post(f"/v1/changes/{ch.id}:approve", json={"reason": "ok"}, headers=admin2).status_code == 200
            outside = client.post(f"/v1/changes/{ch.id}:apply", json={}, headers=admin)
            assert outside.status_code == 409 and outside.json()["gate"] == "window", outside.text
            assert client.get(f"/v1/changes/{ch.id}", headers=admin).json()["status"] == "approved"
            # blast radius: the policy allows 1 node drained per hour; this consolidation frees 2
            nodes = ["ip-10-0-40-11.ec2.internal", "ip-10-0-42-13.ec2.internal"]  # no do-not-disrupt pods
            ch2 = svc.create(actor=root, kind="consolidate_nodes", cluster="prod", namespace=None,
                             target_kind="NodePool", target_name="gpu", current={"node_pool": "gpu", "nodes": 3},
                             proposed={"nodes": 1, "freed_nodes": nodes}, ticket="COST-10", evidence_at=WEDNESDAY)
            assert client.post(f"/v1/changes/{ch2.id}:approve", json={"reason": "ok"}, headers=admin2).status_code == 200
            big = client.post(f"/v1/changes/{ch2.id}:apply", json={}, headers=admin)
            assert big.status_code == 409 and big.json()["gate"] == "blast_radius", big.text
            assert client.get(f"/v1/changes/{ch2.id}", headers=admin).json()["status"] == "approved"
        assert kube.writes() == []


@pytest.mark.parametrize(("method", "path", "kwargs", "status"), [
    ("POST", "/v1/workloads", {"content": b'{"name": "x", ', "headers": {"content-type": "application/json"}}, 400),
    ("POST", "/v1/workloads", {"json": {**_WL, "cpu": "lots"}}, 422),
    ("POST", "/v1/workloads", {"json": {**_WL, "min_replicas": 5, "max_replicas": 2}}, 422),
    ("POST", "/v1/workloads", {"json": {**_WL, "name": "Robert'); DROP TABLE workloads;--"}}, 422),
    ("POST", "/v1/workloads", {"json": {**_WL, "extra": 1}}, 422),
    ("POST", "/v1/workloads", {"json": [_WL]}, 422),
    ("POST", "/v1/workloads", {"content": b"x" * (70 * 1024), "headers": {"content-type": "application/json"}}, 413),
    ("PUT", f"/v1/workloads/{TRAIN_A}/autoscaling", {"json": {"min": 3, "max": 1}}, 422),
    ("PUT", f"/v1/workloads/{TRAIN_A}/autoscaling", {"json": {"min": True, "max": "2"}}, 422),
    ("GET", "/v1/workloads/wl_x' OR '1'='1/cost", {}, 422),
    ("GET", "/v1/recommendations?namespace=alpha-train' OR '1'='1", {}, 200),
    ("GET", "/v1/changes?status=proposed' OR 1=1 --", {}, 422),
    ("GET", "/v1/showback?group_by=team;drop table x", {}, 422),
    ("GET", "/v1/showback?from=2026-11-05&to=2026-11-01", {}, 400),
    ("GET", f"/v1/workloads/{TRAIN_A}/cost?window=1;select", {}, 422),
    ("POST", "/v1/changes/chg_000000000000:approve", {"json": {"reason": 5}}, 422),
    ("POST", "/v1/changes/chg_000000000000:reject", {"json": {}}, 422),
])
def test_bad_input_is_a_clear_4xx_and_changes_nothing(env: Any, method: str, path: str, kwargs: dict[str, Any],
                                                      status: int) -> None:
    client, tokens, app = env
    before = _counts(app)
    headers = {**bearer(tokens["admin"]), **kwargs.pop("headers", {})}
    r = client.request(method, path, headers=headers, **kwargs)
    assert r.status_code == status, r.text
    assert _counts(app) == before
    if status >= 400:
        assert r.headers["content-type"].startswith("application/problem+json") and r.json()["detail"]
    else:
        assert r.json()["items"] == []  # the SQL-looking value was matched literally
