"""The API keeps answering while `gpufinops build` runs: a real uvicorn (`gpufinops serve api`) on a free
port, 8 clients calling it without pause, and a real `gpufinops build --full`, then `gpufinops build`,
as subprocesses on a copy of the `fleet` fixture. Both builds succeed, no response is outside 2xx, and
each client's answer moves from the old build to the new one exactly once (never back).

Each build changes what the API answers: it runs with another fixed overhead per cluster-hour, which
the `(overhead)` showback line carries, and publishes a new version, which the cost endpoint names.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pytest

from gpufinops.appdb.ids import workload_id

pytestmark = pytest.mark.timeout(900)
CLIENTS = 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bin() -> str:
    return str(Path(sys.executable).parent / "gpufinops")


@dataclass
class Seen:
    statuses: list[int] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)  # the cost endpoint's warehouse_version, in order
    overheads: list[float] = field(default_factory=list)  # the (overhead) line's direct cost, in order
    errors: list[str] = field(default_factory=list)


def _client(port: int, token: str, cost_path: str, stop: threading.Event, seen: Seen) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    i = 0
    while not stop.is_set():
        path = cost_path if i % 2 == 0 else "/v1/showback?group_by=namespace"
        i += 1
        try:
            con.request("GET", path, headers=headers)
            res = con.getresponse()
            body = res.read()
        except (OSError, http.client.HTTPException) as exc:
            seen.errors.append(f"{path}: {type(exc).__name__}: {exc}")
            con.close()
            con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            continue
        seen.statuses.append(res.status)
        if res.status != 200:
            seen.errors.append(f"{path}: {res.status} {body[:300]!r}")
            continue
        data = json.loads(body)
        if path == cost_path:
            seen.versions.append(data["warehouse_version"])
        else:
            seen.overheads.append(round(sum(line["direct_cost_usd"] for line in data["lines"]
                                            if line["namespace"] == "(overhead)"), 2))
    con.close()


def _changes(values: list) -> int:
    return sum(1 for a, b in zip(values, values[1:], strict=False) if a != b)


def _under_load(port: int, token: str, cost_path: str, build: list[str], env: dict[str, str]) -> tuple[list[Seen], str]:
    """Run ``build`` while CLIENTS clients call the API; keep the load on a moment after it ends."""
    stop = threading.Event()
    seen = [Seen() for _ in range(CLIENTS)]
    threads = [threading.Thread(target=_client, args=(port, token, cost_path, stop, s), daemon=True) for s in seen]
    for t in threads:
        t.start()
    time.sleep(1.0)
    proc = subprocess.run(build, env=env, capture_output=True, text=True, timeout=600)
    time.sleep(1.5)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return seen, proc.stdout


def test_the_api_serves_every_request_during_a_full_and_an_incremental_build(fleet_copy, tmp_path: Path) -> None:
    from api.auth import TokenStore

    home = fleet_copy.home
    token = TokenStore(home / "api-tokens.yaml").create("load-finance", ["finance"])
    con = duckdb.connect(str(fleet_copy.warehouse), read_only=True)
    cluster, ns, kind, name = con.execute(
        "select cluster, namespace, workload_kind, workload from fct_workload_daily "
        "group by all order by sum(total_cost_usd) desc limit 1").fetchone()
    con.close()
    cost_path = f"/v1/workloads/{workload_id(cluster, ns, kind, name)}/cost?window=24h"
    port = _free_port()
    env = {**os.environ, "GPUFINOPS_HOME": str(home)}
    env.pop("GPUFINOPS_CONFIG", None)
    log = open(tmp_path / "api.log", "w")  # noqa: SIM115 - closed below
    api = subprocess.Popen([_bin(), "--home", str(home), "serve", "api", "--host", "127.0.0.1", "--port", str(port)],
                           env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/healthz")
                health = c.getresponse()
                body = json.loads(health.read())
                if health.status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and api.poll() is None, (tmp_path / "api.log").read_text()
            time.sleep(0.2)
        v0 = body["warehouse_version"]
        total = 0
        for overhead, args in ((2.5, ["build", "--full", "--no-summary"]), (4.0, ["build", "--no-summary"])):
            build_env = {**env, "GPUFINOPS_COST__FIXED_OVERHEAD_USD_PER_HOUR": json.dumps({"*": overhead})}
            seen, out = _under_load(port, token, cost_path, [_bin(), "--home", str(home), *args], build_env)
            assert ("incremental" in out) == (args == ["build", "--no-summary"]), out
            for s in seen:
                assert not s.errors, s.errors[:5]
                assert s.statuses and all(200 <= x < 300 for x in s.statuses)
                assert len(s.versions) > 1 and s.versions[0] == v0
                assert _changes(s.versions) == 1, s.versions  # old build, then the new one, never back
                assert _changes(s.overheads) == 1, s.overheads
                total += len(s.statuses)
            print(f"{args[1] if len(args) > 2 and args[1] == '--full' else 'incremental'} build under load: "
                  f"{sum(len(s.statuses) for s in seen)} requests from {CLIENTS} clients, all 2xx")
            v1 = seen[0].versions[-1]
            assert all(s.versions[-1] == v1 for s in seen) and v1 != v0
            v0 = v1
        assert total > 100  # the load was real: every one of these was a 2xx
    finally:
        api.terminate()
        try:
            api.wait(timeout=30)
        except subprocess.TimeoutExpired:
            api.kill()
        log.close()
