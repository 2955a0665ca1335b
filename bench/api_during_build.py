"""The API while a build runs, at a bench scale: a real `gpufinops serve api` on the home, 8 clients
calling `/v1/showback` without pause while `gpufinops build` (incremental) runs and publishes; reports
the requests, the non-2xx answers and the warehouse versions the clients saw (docs/bench.md).

``python -m bench.api_during_build --home H [--clients 8] [--json FILE]``; `make bench` runs it per scale.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", "--home", str(home), *args]


def run(home: Path, clients: int = 8) -> dict[str, Any]:
    from api.auth import TokenStore

    token = TokenStore(home / "api-tokens.yaml").create(f"bench-during-build-{time.time_ns()}", ["finance"])
    port = _free_port()
    server = subprocess.Popen(_cli(home, "serve", "api", "--host", "127.0.0.1", "--port", str(port)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    statuses: list[int] = []
    versions: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client() -> None:
        con = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while not stop.is_set():
            try:
                con.request("GET", "/v1/showback?group_by=team", headers={"Authorization": f"Bearer {token}"})
                res = con.getresponse()
                res.read()
                status = res.status
            except (OSError, http.client.HTTPException):
                status = 0
                con.close()
                con = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            with lock:
                statuses.append(status)

    def poll_version() -> None:
        # the published build the API serves (/healthz names it), in the order seen
        while not stop.is_set():
            try:
                con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                con.request("GET", "/healthz")
                version = json.loads(con.getresponse().read() or b"{}").get("warehouse_version")
                con.close()
            except (OSError, http.client.HTTPException, ValueError):
                version = None
            if version and (not versions or versions[-1] != version):
                versions.append(version)
            time.sleep(0.2)

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                probe.request("GET", "/healthz")
                if probe.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the API did not come up")
            time.sleep(0.5)
        threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
        threads.append(threading.Thread(target=poll_version, daemon=True))
        for t in threads:
            t.start()
        time.sleep(2.0)
        started = time.monotonic()
        build = subprocess.run(_cli(home, "build", "--no-summary"), capture_output=True, text=True)
        build_s = time.monotonic() - started
        time.sleep(2.0)  # answers after the publish
        stop.set()
        for t in threads:
            t.join(timeout=130)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    return {"clients": clients, "requests": len(statuses), "non_2xx": sum(1 for s in statuses if not 200 <= s < 300),
            "build_ok": build.returncode == 0, "build_s": round(build_s, 1), "versions_seen": len(versions),
            "build_tail": (build.stderr or build.stdout)[-300:] if build.returncode else ""}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    out = run(args.home, args.clients)
    print(json.dumps(out))
    if args.json:
        args.json.write_text(json.dumps(out))
    return 0 if out["build_ok"] and out["non_2xx"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
