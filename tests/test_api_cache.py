"""The read endpoints' response cache (api/response_cache.py) never serves what it must not: a publish
makes the next request answer from the new version, a revoked or rotated token stops working at once
even for an answer the cache holds, another team's caller gets 404 for a cached cost answer, and a
commit to the app DB (here through another engine, as the recommender writes) shows on the next
request. On the dbt-built mini warehouse (the `mini_fleet` fixture), copied per test."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from fastapi.testclient import TestClient

_spec = importlib.util.spec_from_file_location("api_support", Path(__file__).parent / "fixtures/api/support.py")
assert _spec and _spec.loader
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)
bearer = support.bearer

from gpufinops.appdb.ids import workload_id  # noqa: E402

TRAIN_A = workload_id("c1", "alpha-train", "Job", "train-a")
COST = f"/v1/workloads/{TRAIN_A}/cost?window=7d"
SHOWBACK = "/v1/showback?group_by=namespace"


@pytest.fixture()
def env(tmp_path: Path, mini_fleet: Any) -> Iterator[tuple[TestClient, dict[str, str], Any, Any]]:
    settings, tokens = support.build_home(tmp_path, mini_fleet)
    app = support.make_app(settings)
    with TestClient(app) as client:
        yield client, tokens, app, settings


def _publish_doubled(link: Path) -> str:
    """A new version whose costs are twice the live one's, published as a build publishes it."""
    from gpufinops.warehouse import live_file, versions_dir
    from transform.publish import publish

    new = versions_dir(link) / "20991231T000000000000Z.duckdb"
    shutil.copyfile(live_file(link), new)
    con = duckdb.connect(str(new))
    for table in ("fct_workload_daily", "fct_gpu_allocation_hourly"):
        con.execute(f"update {table} set total_cost_usd = total_cost_usd * 2")
    con.execute("update fct_showback_daily set chargeback_usd = chargeback_usd * 2")
    con.close()
    publish(link, new)
    return new.stem


def test_a_publish_is_seen_by_the_next_request(env: Any) -> None:
    client, tokens, app, settings = env
    h = bearer(tokens["finance"])
    first = client.get(COST, headers=h).json()
    shown = client.get(SHOWBACK, headers=h).json()
    cache = app.state.ctx.responses
    hits = cache.hits
    assert client.get(COST, headers=h).json() == first  # a repeat: answered from the cache
    assert client.get(SHOWBACK, headers=h).json() == shown
    assert cache.hits == hits + 2

    version = _publish_doubled(Path(settings.warehouse_path))
    after = client.get(COST, headers=h).json()
    assert after["warehouse_version"] == version != first["warehouse_version"]
    assert after["cost_usd"] == pytest.approx(2 * first["cost_usd"], abs=0.02)
    shown_after = client.get(SHOWBACK, headers=h).json()
    assert shown_after["total_chargeback_usd"] == pytest.approx(2 * shown["total_chargeback_usd"], abs=0.05)
    # and the new answers are what the cache now holds
    assert client.get(COST, headers=h).json() == after


def test_a_revoked_or_rotated_token_stops_at_once_even_for_a_cached_answer(env: Any) -> None:
    from api.auth import TokenStore

    client, _, app, settings = env
    path = app.state.ctx.auth.store.path
    other = TokenStore(path)  # another process's view of the file (`gpufinops api token revoke`)
    token = other.create("short-lived", ["finance"])
    assert client.get(COST, headers=bearer(token)).status_code == 200
    assert client.get(COST, headers=bearer(token)).status_code == 200  # cached answer, cached token check
    assert other.revoke("short-lived")
    gone = client.get(COST, headers=bearer(token))
    assert gone.status_code == 401 and gone.headers["content-type"].startswith("application/problem+json")
    assert client.get(SHOWBACK, headers=bearer(token)).status_code == 401

    old = other.create("rotated", ["finance"])
    assert client.get(COST, headers=bearer(old)).status_code == 200
    new = other.create("rotated", ["finance"], replace=True)
    assert client.get(COST, headers=bearer(old)).status_code == 401
    assert client.get(COST, headers=bearer(new)).status_code == 200


def test_a_cached_cost_answer_is_404_for_another_team_and_scoped_showback_stays_scoped(env: Any) -> None:
    client, tokens, _, _ = env
    alpha = client.get(COST, headers=bearer(tokens["member-alpha"]))
    assert alpha.status_code == 200
    for _ in range(2):  # the second time the answer is in the cache
        beta = client.get(COST, headers=bearer(tokens["member-beta"]))
        # exactly what an unknown id answers
        assert beta.status_code == 404 and beta.json()["detail"] == f"workload {TRAIN_A} not found"
        assert beta.headers["content-type"].startswith("application/problem+json")
    everything = client.get(SHOWBACK, headers=bearer(tokens["finance"])).json()
    for _ in range(2):
        mine = client.get(SHOWBACK, headers=bearer(tokens["member-beta"])).json()
        assert mine["lines"] and {line["team"] for line in mine["lines"]} == {"beta"}
    assert len(everything["lines"]) > len(mine["lines"])


def test_an_app_db_commit_shows_on_the_next_request(env: Any) -> None:
    from gpufinops.appdb import open_app_db
    from gpufinops.appdb.schema import recommendations

    client, tokens, _, settings = env
    h = bearer(tokens["finance"])
    before = client.get(COST, headers=h).json()
    assert client.get(COST, headers=h).json() == before
    engine = open_app_db(settings.effective_app_db_url)  # not the API's engine: as the recommender writes
    at = datetime(2026, 11, 2, 23, tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(recommendations.insert().values(
            id="rec_new", kind="rightsize_gpu_count", cluster="c1", namespace="alpha-train", workload="train-a",
            tier="training", current={"gpus": 4}, proposed={"gpus": 2}, evidence={"window": "7d"},
            est_monthly_savings_usd=55.5, confidence=0.8, risk="low", created_at=at, updated_at=at,
            last_seen_at=at, status="open"))
    engine.dispose()
    after = client.get(COST, headers=h).json()
    ids = [g["recommendation_id"] for g in after["rightsizing"]["gpu"]]
    assert "rec_new" in ids and "rec_new" not in [g["recommendation_id"] for g in before["rightsizing"]["gpu"]]
    assert after["rightsizing"]["est_monthly_savings_usd"] == pytest.approx(
        before["rightsizing"]["est_monthly_savings_usd"] + 55.5, abs=0.01)
