"""Live Kubernetes ingest against a local HTTP server that replays recorded API responses.

No kube-apiserver can run here, so the boundary is faked the way httpx's MockTransport does it:
the real ``kubernetes`` client (Configuration, auth, urllib3) talks HTTP to a loopback server
that answers from JSON files recorded in tests/fixtures/k8s/api/.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyarrow.parquet as pq
import pytest
import yaml
from kubernetes import client as k8s_client
from typer.testing import CliRunner

from cli.main import app
from gpufinops.errors import ConfigError, TerminalError, TransientError
from ingest.k8s.live import ApiLister, api_client_from, list_targets, run_live, take_snapshot
from ingest.k8s.settings import K8sSettings, parse_duration
from ingest.k8s.snapshot import land_snapshot
from ingest.lake import LakeWriter, list_runs, partition_files

API = Path(__file__).parent / "fixtures" / "k8s" / "api"
TOKEN1 = json.loads((API / "pods-page1.json").read_text())["metadata"]["continue"]
TOKEN2 = json.loads((API / "pods-page2.json").read_text())["metadata"]["continue"]


# -- the replaying server -------------------------------------------------------------------------
@dataclass
class Reply:
    status: int
    fixture: str | None = None  # file under tests/fixtures/k8s/api
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: bytes | None = None

    def payload(self) -> bytes:
        if self.body is not None:
            return self.body
        return (API / self.fixture).read_bytes() if self.fixture else b""


def ok(fixture: str) -> Reply:
    return Reply(200, fixture)


EMPTY = {"apps": b'{"kind":"StatefulSetList","apiVersion":"apps/v1","metadata":{"resourceVersion":"1"},"items":[]}'}


def happy_routes() -> dict[tuple[str, str | None], list[Reply]]:
    """(path, continue token) -> replies, served in order; the last one repeats."""
    return {
        ("/api/v1/pods", None): [ok("pods-page1.json")],
        ("/api/v1/pods", TOKEN1): [ok("pods-page2.json")],
        ("/api/v1/pods", TOKEN2): [ok("pods-page3.json")],
        ("/api/v1/nodes", None): [ok("nodes.json")],
        ("/api/v1/namespaces", None): [ok("namespaces.json")],
        ("/apis/apps/v1/replicasets", None): [ok("replicasets.json")],
        ("/apis/batch/v1/jobs", None): [ok("jobs.json")],
        ("/apis/apps/v1/statefulsets", None): [Reply(200, body=EMPTY["apps"])],
        # ray.io is not installed in this cluster: 404, like a real API server
        ("/apis/ray.io/v1/rayclusters", None): [Reply(404, "status-404.json")],
    }


class ReplayServer:
    def __init__(self) -> None:
        self.routes = happy_routes()
        self.log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else every reply waits ~40 ms for a delayed ACK

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                reply = outer._next(url.path, query.get("continue"))
                with outer._lock:
                    outer.log.append({"path": url.path, "query": query, "auth": self.headers.get("Authorization"),
                                      "status": reply.status})
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                body = reply.payload()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out first, which is what the test wanted

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _next(self, path: str, token: str | None) -> Reply:
        with self._lock:
            queue = self.routes.get((path, token))
            if not queue:
                return Reply(404, "status-404.json")
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def paths(self) -> list[tuple[str, str | None]]:
        return [(r["path"], r["query"].get("continue")) for r in self.log]


@pytest.fixture()
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


FAST = dict(backoff_base_s=0.01, backoff_max_s=0.05, connect_timeout_s=2.0, read_timeout_s=5.0)


def make_lister(server: ReplayServer, sleeps: list[float] | None = None, **overrides: Any) -> ApiLister:
    settings = K8sSettings(**{**FAST, "page_size": 3, **overrides})
    cfg = k8s_client.Configuration(host=server.host)
    cfg.api_key = {"BearerToken": "test-token"}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    cfg.retries = False
    record = sleeps if sleeps is not None else []
    return ApiLister(k8s_client.ApiClient(cfg), settings, sleep=record.append)


def snapshot(server: ReplayServer, sleeps: list[float] | None = None, **overrides: Any) -> Any:
    lister = make_lister(server, sleeps, **overrides)
    return take_snapshot(lister, list_targets(lister.settings), now=lambda: datetime(2026, 11, 28, 8, tzinfo=UTC))


def pod_rows(home_lake: Path) -> list[dict[str, Any]]:
    return [r for f in partition_files(home_lake, "k8s_pods") for r in pq.read_table(f).to_pylist()]


# -- tests ------------------------------------------------------------------------------------------
def test_paginated_lists_and_owner_resolution(server: ReplayServer, tmp_path: Path) -> None:
    snap = snapshot(server)
    assert snap.counts == {"nodes": 4, "pods": 7, "namespaces": 6}
    pod_calls = [r for r in server.log if r["path"] == "/api/v1/pods"]
    assert [r["query"].get("continue") for r in pod_calls] == [None, TOKEN1, TOKEN2]
    assert all(r["query"]["limit"] == "3" for r in server.log)
    assert all(r["auth"] == "Bearer test-token" for r in server.log)
    record = land_snapshot(LakeWriter(tmp_path / "lake"), "live", snap)
    assert record.rows == {"k8s_nodes": 4, "k8s_pods": 7, "k8s_namespaces": 6}
    owners = {r["pod"]: (r["owner_kind"], r["owner_name"]) for r in pod_rows(tmp_path / "lake")}
    assert owners["llm-api-7d9f8b6c5d-x2k4p"] == ("Deployment", "llm-api")  # RS listed from the API
    assert owners["nightly-eval-29412345-7wzvq"] == ("CronJob", "nightly-eval")
    assert owners["bert-finetune-worker-0"] == ("PyTorchJob", "bert-finetune")


def test_410_gone_restarts_the_list(server: ReplayServer) -> None:
    server.routes[("/api/v1/pods", TOKEN1)] = [Reply(410, "status-410-expired.json"), ok("pods-page2.json")]
    snap = snapshot(server)
    assert snap.counts["pods"] == 7  # no page counted twice
    pods = [p for p in server.paths() if p[0] == "/api/v1/pods"]
    assert pods == [("/api/v1/pods", t) for t in (None, TOKEN1, None, TOKEN1, TOKEN2)]


def test_410_every_time_gives_up(server: ReplayServer) -> None:
    server.routes[("/api/v1/pods", TOKEN1)] = [Reply(410, "status-410-expired.json")]
    with pytest.raises(TransientError, match="410"):
        snapshot(server, max_list_restarts=2)
    assert sum(1 for p in server.paths() if p == ("/api/v1/pods", None)) == 3


def test_500_then_success_backs_off_exponentially(server: ReplayServer) -> None:
    server.routes[("/api/v1/nodes", None)] = [Reply(500, "status-500.json"), Reply(503, "status-500.json"), ok("nodes.json")]
    sleeps: list[float] = []
    snap = snapshot(server, sleeps, backoff_base_s=0.5, backoff_max_s=30)
    assert snap.counts["nodes"] == 4
    assert sleeps == [0.5, 1.0]


def test_429_honours_retry_after(server: ReplayServer) -> None:
    server.routes[("/api/v1/namespaces", None)] = [Reply(429, "status-429.json", {"Retry-After": "7"}), ok("namespaces.json")]
    sleeps: list[float] = []
    snap = snapshot(server, sleeps)
    assert snap.counts["namespaces"] == 6
    assert sleeps == [7.0]


def test_retries_exhausted_is_transient(server: ReplayServer) -> None:
    server.routes[("/api/v1/nodes", None)] = [Reply(500, "status-500.json")]
    sleeps: list[float] = []
    with pytest.raises(TransientError, match=r"gave up after 3 attempts.*etcdserver: request timed out"):
        snapshot(server, sleeps, max_attempts=3)
    assert len(sleeps) == 2


def test_403_names_the_missing_rbac_rule(server: ReplayServer, tmp_path: Path) -> None:
    server.routes[("/api/v1/pods", None)] = [Reply(403, "status-403-pods.json")]
    with pytest.raises(TerminalError) as err:
        snapshot(server)
    msg = str(err.value)
    assert 'forbidden: the ingester needs "list" on "pods" (cluster-wide)' in msg
    assert "deploy/base/rbac.yaml" in msg and "gpufinops-ingester" in msg
    assert not isinstance(err.value, TransientError)


def test_403_on_replicasets_names_the_api_group(server: ReplayServer) -> None:
    server.routes[("/apis/apps/v1/replicasets", None)] = [Reply(403, body=b'{"kind":"Status","message":"nope"}')]
    with pytest.raises(TerminalError, match='needs "list" on "replicasets.apps"'):
        snapshot(server)


def test_optional_crd_forbidden_or_missing_is_skipped(server: ReplayServer) -> None:
    server.routes[("/apis/apps/v1/statefulsets", None)] = [Reply(403, body=b'{"kind":"Status","message":"no"}')]
    snap = snapshot(server)
    assert snap.counts == {"nodes": 4, "pods": 7, "namespaces": 6}
    assert ("/apis/ray.io/v1/rayclusters", None) in server.paths()


def test_401_is_terminal(server: ReplayServer) -> None:
    server.routes[("/api/v1/pods", None)] = [Reply(401, "status-401.json")]
    with pytest.raises(TerminalError, match="unauthorized"):
        snapshot(server)


def test_read_timeout_is_retried(server: ReplayServer) -> None:
    server.routes[("/api/v1/namespaces", None)] = [Reply(200, "namespaces.json", delay_s=1.0), ok("namespaces.json")]
    sleeps: list[float] = []
    snap = snapshot(server, sleeps, read_timeout_s=0.2)
    assert snap.counts["namespaces"] == 6
    assert len(sleeps) == 1


def test_connection_refused_is_transient(tmp_path: Path) -> None:
    srv = ReplayServer()  # bound but never serving: take its port, then close it
    srv.httpd.server_close()
    with pytest.raises(TransientError):
        snapshot(srv, max_attempts=2)


def test_loop_mode_survives_a_failed_iteration(server: ReplayServer, tmp_path: Path) -> None:
    # Iteration 1: nodes fail past the retry budget; iteration 2 succeeds.
    server.routes[("/api/v1/nodes", None)] = [Reply(500, "status-500.json"), Reply(500, "status-500.json"), ok("nodes.json")]
    lister = make_lister(server, max_attempts=2)
    clock = [0.0]
    slept: list[float] = []

    def fake_sleep(s: float) -> None:
        slept.append(s)
        clock[0] += s

    times = iter([datetime(2026, 11, 28, 8, 0, tzinfo=UTC) + timedelta(seconds=60 * i) for i in range(5)])
    landed = run_live(lister, list_targets(lister.settings), LakeWriter(tmp_path / "lake"), "c", every_s=60,
                      iterations=3, sleep=fake_sleep, clock=lambda: clock[0], now=lambda: next(times))
    assert landed == 2
    assert slept == [60.0, 60.0]
    stamps = sorted({r["snapshot_ts"] for r in pod_rows(tmp_path / "lake")})
    assert len(stamps) == 2 and stamps[1] - stamps[0] == timedelta(seconds=60)


def test_loop_mode_stops_on_rbac_error(server: ReplayServer, tmp_path: Path) -> None:
    server.routes[("/api/v1/pods", None)] = [Reply(403, "status-403-pods.json")]
    lister = make_lister(server)
    with pytest.raises(TerminalError):
        run_live(lister, list_targets(lister.settings), LakeWriter(tmp_path / "lake"), "c", every_s=60,
                 iterations=3, sleep=lambda s: None)
    assert [r for r in list_runs(tmp_path / "lake") if r.status == "committed"] == []


def _kubeconfig(path: Path, server: ReplayServer) -> Path:
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "elsewhere",
        "clusters": [{"name": "replay", "cluster": {"server": server.host}},
                     {"name": "other", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "ingester", "user": {"token": "kubeconfig-token"}}],
        "contexts": [{"name": "replay", "context": {"cluster": "replay", "user": "ingester"}},
                     {"name": "elsewhere", "context": {"cluster": "other", "user": "ingester"}}],
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_kubeconfig_and_context(server: ReplayServer, tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kubeconfig", server)
    api = api_client_from(K8sSettings(kubeconfig=kc, context="replay"))
    assert api.configuration.host == server.host
    with pytest.raises(ConfigError, match="context 'nope'"):
        api_client_from(K8sSettings(kubeconfig=kc, context="nope"))
    with pytest.raises(ConfigError, match="missing-kubeconfig"):
        api_client_from(K8sSettings(kubeconfig=tmp_path / "missing-kubeconfig", in_cluster=False))


def test_cli_live_loop(server: ReplayServer, tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kubeconfig", server)
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "ingest", "k8s", "--cluster", "live",
                                      "--kubeconfig", str(kc), "--context", "replay", "--page-size", "3",
                                      "--every", "1s", "--iterations", "2"])
    assert result.exit_code == 0, result.output
    assert "2 snapshot(s) landed" in result.output
    pods = pod_rows(tmp_path / "home" / "lake")
    assert len(pods) == 14 and len({r["snapshot_ts"] for r in pods}) == 2
    assert {r["auth"] for r in server.log} == {"Bearer kubeconfig-token"}


def test_cli_live_forbidden_exits_2(server: ReplayServer, tmp_path: Path) -> None:
    server.routes[("/api/v1/pods", None)] = [Reply(403, "status-403-pods.json")]
    kc = _kubeconfig(tmp_path / "kubeconfig", server)
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "ingest", "k8s", "--cluster", "live",
                                      "--kubeconfig", str(kc), "--context", "replay"])
    assert result.exit_code == 2
    assert 'needs "list" on "pods"' in " ".join(result.output.split())


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60.0), ("5m", 300.0), ("1h", 3600.0), ("90", 90.0), ("1.5m", 90.0)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "soon", "-5s", "0s", "5 parsecs"])
def test_parse_duration_rejects(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_duration(bad, option="--every")


def _fake_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import incluster_config

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


def test_in_cluster_is_autodetected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ReplayServer) -> None:
    _fake_service_account(tmp_path, monkeypatch)
    api = api_client_from(K8sSettings())
    assert api.configuration.host == "https://10.96.0.1:443"
    assert api.configuration.api_key["BearerToken"].endswith("sa-token")
    # an explicit kubeconfig wins over the pod's service account
    kc = _kubeconfig(tmp_path / "kubeconfig", server)
    assert api_client_from(K8sSettings(kubeconfig=kc, context="replay")).configuration.host == server.host


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFINOPS_K8S_PAGE_SIZE", "250")
    monkeypatch.setenv("GPUFINOPS_K8S_CONTEXT", "prod")
    s = K8sSettings()
    assert (s.page_size, s.context) == (250, "prod")
    assert [r.resource for r in s.owner_resources][:2] == ["replicasets.apps", "jobs.batch"]


def test_ingest_once_for_schedulers(server: ReplayServer, tmp_path: Path) -> None:
    from ingest.k8s.live import ingest_once

    kc = _kubeconfig(tmp_path / "kubeconfig", server)
    snap, record = ingest_once(LakeWriter(tmp_path / "lake"), "sched", K8sSettings(kubeconfig=kc, context="replay", page_size=3))
    assert record.status == "committed" and record.cluster == "sched"
    assert record.rows["k8s_pods"] == snap.counts["pods"] == 7


def test_settings_precedence_cli_env_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "gpufinops.yaml"
    cfg.write_text(yaml.safe_dump({"home": "/x", "k8s": {"page_size": 100, "context": "from-yaml", "max_attempts": 2}}))
    monkeypatch.setenv("GPUFINOPS_K8S_CONTEXT", "from-env")
    s = K8sSettings.load(cfg, page_size=7, kubeconfig=None)
    assert (s.page_size, s.context, s.max_attempts) == (7, "from-env", 2)
    assert K8sSettings.load(cfg).page_size == 100
    cfg.write_text(yaml.safe_dump({"k8s": {"page_size": 0}}))
    with pytest.raises(ConfigError, match="page_size"):
        K8sSettings.load(cfg)
