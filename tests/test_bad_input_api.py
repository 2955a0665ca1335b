"""Bad API requests: a problem+json 4xx whose detail names the field or limit, and the app DB
unchanged (tests/badinput.py's snapshot)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from badinput import snapshot
from fastapi.testclient import TestClient

_spec = importlib.util.spec_from_file_location("api_support_bad", Path(__file__).parent / "fixtures/api/support.py")
assert _spec and _spec.loader
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)

WEDNESDAY = datetime(2026, 11, 4, 12, 0, tzinfo=UTC)
_WL = {"name": "x1", "image": "i:1", "cpu": 1, "mem_gb": 1, "min_replicas": 1, "max_replicas": 2,
       "scale_metric": "rps", "budget_usd_day": 1, "namespace": "alpha-train"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, mini_fleet: Any) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    home = tmp_path_factory.mktemp("api-bad")
    settings, tokens = support.build_home(home, mini_fleet)
    app = support.make_app(settings, clock=lambda: WEDNESDAY, max_body_bytes=64 * 1024)
    with TestClient(app) as client:
        yield client, tokens, home


def _chunks(n: int, size: int) -> Iterator[bytes]:
    yield b'{"name": "'
    for _ in range(n):
        yield b"x" * size
    yield b'"}'


CASES: list[tuple[str, str, str, dict[str, Any], int, list[str]]] = [
    ("chunked-over-limit", "POST", "/v1/workloads", {"content": _chunks(20, 8192)}, 413, ["65536 bytes", "max_body_bytes"]),
    ("declared-over-limit", "POST", "/v1/workloads", {"content": b"x" * (70 * 1024)}, 413, ["65536 bytes"]),
    ("not-json", "POST", "/v1/workloads", {"content": b'{"name": '}, 400, ["not valid JSON"]),
    ("unknown-field", "POST", "/v1/workloads", {"json": {**_WL, "colour": "red"}}, 422, ["colour"]),
    ("min-above-max", "POST", "/v1/workloads", {"json": {**_WL, "min_replicas": 5, "max_replicas": 2}}, 422, ["replicas"]),
    ("reversed-dates", "GET", "/v1/showback?from=2026-11-05&to=2026-11-01", {}, 400, ["from", "to"]),
    ("bad-group-by", "GET", "/v1/showback?group_by=colour", {}, 422, ["group_by"]),
]


@pytest.mark.parametrize(("method", "path", "kwargs", "status", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_request_is_a_clear_4xx_and_changes_nothing(env: Any, method: str, path: str, kwargs: dict[str, Any],
                                                         status: int, names: list[str]) -> None:
    client, tokens, home = env
    before = snapshot(home)
    headers = {**support.bearer(tokens["admin"]), "content-type": "application/json"}
    r = client.request(method, path, headers=headers, **kwargs)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    detail = r.json()["detail"]
    for name in names:
        assert name in detail, (name, detail)
    assert snapshot(home) == before


def test_no_token_is_401_and_changes_nothing(env: Any) -> None:
    client, _, home = env
    before = snapshot(home)
    r = client.post("/v1/workloads", json=_WL)
    assert r.status_code == 401 and "token" in r.json()["detail"].lower()
    assert snapshot(home) == before
