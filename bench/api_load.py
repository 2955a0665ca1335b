"""A bounded load test of the API on loopback: N concurrent clients (asyncio + httpx, or a minimal raw
HTTP/1.1 client) against a uvicorn server for S seconds, per endpoint: the cost of the costliest workload
(GET /v1/workloads/{id}/cost?window=7d) and the showback (GET /v1/showback?group_by=namespace), and,
first, a trivial FastAPI route returning a constant JSON body (bench/trivial_app.py) served with the same
uvicorn settings and driven by the same client: the baseline. Prints one markdown row per endpoint:
requests, req/s, p50/p95/p99 ms, errors, the server's CPU (% of one core, ms/request) and peak RSS, the
load generator's own CPU (% of one core, ms/request: near 100 % means the client, not the server, was
the limit) and the req/s as a ratio of the baseline's.

    python -m bench.api_load [--home DIR] [--clients 200] [--seconds 20] [--client httpx|raw]
                             [--client-procs 1] [--server-threads N] [--path PATH]
                             [--endpoints cost,showback] [--no-baseline] [--json FILE]

Without ``--home`` it builds the tests' mini world (tests/fixtures/faces/mini_lake.py, through
``dbt build``) and its app DB in a temp folder. With
``--home`` the warehouse is read in place (read-only) and the app DB is copied to the temp folder, so the
home is not modified. The server runs in a child process (client and server never share a process or an
event loop) and is warmed up before the clock starts; a token with the finance role is created for the
run in a temp tokens file. ``--client-procs K`` splits the clients over K client processes, for when one
Python client process is the bottleneck: the CPU columns say which side saturates (a side near 100% of
one core is the limit; the server is one process, so its threads share one GIL).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

__all__ = ["main", "run_load", "run_load_raw", "percentile"]

_ROOT = Path(__file__).resolve().parents[1]
_TICK = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(home: str, port: int, app_db_url: str | None, threads: int | None) -> None:
    import uvicorn

    from api.app import create_app
    from api.config import load_api_settings
    from gpufinops.settings import Settings

    settings = Settings(home=Path(home), app_db_url=app_db_url)
    api = load_api_settings(settings, threadpool_size=threads)
    uvicorn.run(create_app(settings, api_settings=api), host="127.0.0.1", port=port, log_level="warning",
                access_log=False)


def _fixture(name: str, rel: str):
    spec = importlib.util.spec_from_file_location(name, _ROOT / rel)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mini_home(home: Path) -> None:
    """The test suite's mini world (tests/fixtures/faces/mini_lake.py) through `dbt build`, and its app DB."""
    from gpufinops.settings import Settings
    from transform import run_build

    settings = Settings(home=home)
    _fixture("bench_mini_lake", "tests/fixtures/faces/mini_lake.py").write_mini_lake(settings.lake_dir)
    run_build(settings, full_refresh=True)
    _fixture("bench_dash_support", "tests/fixtures/dashboards/support.py").build_app_db(home)


def _pick_path(home: Path) -> str:
    from gpufinops.appdb.ids import workload_id
    from gpufinops.warehouse import connect

    con = connect(home / "warehouse.duckdb", read_only=True)
    try:
        # the daily mart: ~24x fewer rows than the hourly one, same sums (fleet scale: no Python-side load)
        row = con.execute("select cluster, namespace, workload_kind, workload from fct_workload_daily "
                          "group by all order by sum(total_cost_usd) desc, 1, 2, 3, 4 limit 1").fetchone()
    finally:
        con.close()
    assert row is not None, "the warehouse has no workloads"
    return f"/v1/workloads/{workload_id(*row)}/cost?window=7d"


def percentile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0..1) of an ascending list; 0 when empty."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), int(-(-q * len(sorted_values) // 1))))
    return sorted_values[rank - 1]


def _proc_cpu_s(pid: int) -> float | None:
    """user + system CPU seconds of a process (all its threads), from /proc; None where there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


def _proc_peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def run_load(base: str, path: str, token: str, clients: int, seconds: float,
                   warmup_s: float = 0.0) -> dict[str, Any]:
    """``clients`` workers each sending one request after another for ``warmup_s`` (not counted), then
    ``seconds``; latencies of the requests started in the measured window, errors = non-200 or failed."""
    latencies: list[float] = []
    errors = 0
    sent = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, limits=limits,
                                 timeout=60.0) as client:
        t_warm = time.perf_counter()
        t_start = t_warm + warmup_s
        deadline = t_start + seconds

        async def worker() -> None:
            nonlocal errors, sent
            while (t0 := time.perf_counter()) < deadline:
                sent += 1
                try:
                    r = await client.get(path)
                    ok = r.status_code == 200
                except httpx.HTTPError:
                    ok = False
                if t0 >= t_start:
                    latencies.append(time.perf_counter() - t0)
                    if not ok:
                        errors += 1

        cpu0 = time.process_time()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - t_start
        cpu = time.process_time() - cpu0
    return {"latencies": latencies, "errors": errors, "seconds": elapsed, "client_cpu_s": cpu, "sent": sent}


async def run_load_raw(base: str, path: str, token: str, clients: int, seconds: float,
                       warmup_s: float = 0.0) -> dict[str, Any]:
    """``run_load`` with a minimal HTTP/1.1 keep-alive client on asyncio streams instead of httpx: about a
    tenth of httpx's CPU per request, so one client process does not limit the server it measures."""
    host, port = base.split("//", 1)[1].rsplit(":", 1)
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
               "Accept: application/json\r\n\r\n").encode()
    latencies: list[float] = []
    errors = 0
    sent = 0
    t_start = time.perf_counter() + warmup_s
    deadline = t_start + seconds

    async def worker() -> None:
        nonlocal errors, sent
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while (t0 := time.perf_counter()) < deadline:
                sent += 1
                try:
                    writer.write(request)
                    head = await reader.readuntil(b"\r\n\r\n")
                    lines = head.split(b"\r\n")
                    status = int(lines[0].split()[1])
                    length = next(int(v) for k, _, v in (ln.partition(b":") for ln in lines[1:])
                                  if k.strip().lower() == b"content-length")
                    await reader.readexactly(length)
                    ok = status == 200
                except (OSError, asyncio.IncompleteReadError, ValueError, StopIteration):
                    ok = False
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, int(port))
                if t0 >= t_start:
                    latencies.append(time.perf_counter() - t0)
                    if not ok:
                        errors += 1
        finally:
            writer.close()

    cpu0 = time.process_time()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return {"latencies": latencies, "errors": errors, "seconds": time.perf_counter() - t_start,
            "client_cpu_s": time.process_time() - cpu0, "sent": sent}


def _load(raw: bool, *args: Any) -> dict[str, Any]:
    return asyncio.run((run_load_raw if raw else run_load)(*args))


def _client_proc(raw: bool, base: str, path: str, token: str, clients: int, seconds: float, warmup_s: float,
                 start_at: float, out: Any) -> None:
    time.sleep(max(0.0, start_at - time.time()))
    out.put(_load(raw, base, path, token, clients, seconds, warmup_s))


def _measure(raw: bool, base: str, path: str, token: str, clients: int, seconds: float, warmup_s: float,
             procs: int) -> dict[str, Any]:
    if procs <= 1:
        return _load(raw, base, path, token, clients, seconds, warmup_s)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 2.0  # every process starts its clock together
    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    workers = [ctx.Process(target=_client_proc, args=(raw, base, path, token, n, seconds, warmup_s, start_at, out))
               for n in shares if n]
    for w in workers:
        w.start()
    parts = [out.get() for _ in workers]
    for w in workers:
        w.join()
    return {"latencies": [x for p in parts for x in p["latencies"]], "errors": sum(p["errors"] for p in parts),
            "seconds": max(p["seconds"] for p in parts), "client_cpu_s": sum(p["client_cpu_s"] for p in parts),
            "sent": sum(p["sent"] for p in parts)}


def _wait_ready(base: str, probe: str, headers: dict[str, str]) -> bool:
    for _ in range(600):
        try:
            if httpx.get(base + probe, headers=headers, timeout=1).status_code in (200, 503):
                return True
        except httpx.HTTPError:
            time.sleep(0.1)
    return False


def measure_server(target: Any, target_args: tuple[Any, ...], port: int, path: str, token: str,
                   args: argparse.Namespace, label: str, probe: str = "/healthz") -> dict[str, Any]:
    """Start ``target(*target_args)`` (a uvicorn server on ``port``) in a child process, check that
    ``path`` answers 200, drive it for ``args.warmup`` + ``args.seconds`` and return the figures: the
    server's req/s, latency quantiles, errors, CPU ms/request and peak RSS, and the client's CPU."""
    headers = {"Authorization": f"Bearer {token}"}
    server = multiprocessing.get_context("spawn").Process(target=target, args=(*target_args, port), daemon=True)
    server.start()
    assert server.pid is not None
    base = f"http://127.0.0.1:{port}"
    try:
        if not _wait_ready(base, probe, headers):
            raise RuntimeError(f"{label}: the server did not start")
        first = httpx.get(base + path, headers=headers, timeout=60)
        if first.status_code != 200:
            raise RuntimeError(f"{label}: GET {path} answered {first.status_code}: {first.text[:500]}")
        cpu0, wall0 = _proc_cpu_s(server.pid), time.perf_counter()
        res = _measure(args.client == "raw", base, path, token, args.clients, args.seconds, args.warmup,
                       args.client_procs)
        cpu1, wall = _proc_cpu_s(server.pid), time.perf_counter() - wall0
        rss = _proc_peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.join(10)
    lat = sorted(res["latencies"])
    n, secs = len(lat), res["seconds"]
    server_cpu = (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None
    return {
        "endpoint": label, "path": path, "client": args.client, "clients": args.clients,
        "client_procs": args.client_procs, "seconds": round(secs, 1), "requests": n,
        "req_s": round(n / secs, 1) if secs else 0.0,
        "p50_ms": round(percentile(lat, 0.50) * 1000, 1), "p95_ms": round(percentile(lat, 0.95) * 1000, 1),
        "p99_ms": round(percentile(lat, 0.99) * 1000, 1), "errors": res["errors"],
        # CPU over the whole run (warm-up included) as a share of one core: 100 = one core busy all along;
        # per request over every request sent (the warm-up ones are in the CPU figure too)
        "server_cpu_pct": round(server_cpu / wall * 100, 0) if server_cpu is not None else None,
        "server_cpu_ms_per_req": round(server_cpu / res["sent"] * 1000, 2) if server_cpu is not None and res["sent"] else None,
        "client_cpu_pct": round(res["client_cpu_s"] / (secs + args.warmup) * 100, 0) if secs else None,
        "client_cpu_ms_per_req": round(res["client_cpu_s"] / res["sent"] * 1000, 2) if res["sent"] else None,
        "server_peak_rss_mb": round(rss, 0) if rss is not None else None,
    }


_COLUMNS = ["endpoint", "client", "clients", "client_procs", "seconds", "requests", "req_s", "p50_ms", "p95_ms",
            "p99_ms", "errors", "server_cpu_pct", "server_cpu_ms_per_req", "client_cpu_pct", "client_cpu_ms_per_req",
            "server_peak_rss_mb", "ratio_to_trivial"]


def markdown(rows: list[dict[str, Any]]) -> str:
    out = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for r in rows:
        out.append("| " + " | ".join("n/a" if r.get(c) is None else str(r.get(c)) for c in _COLUMNS) + " |")
    return "\n".join(out)


def _serve_trivial(port: int) -> None:
    import uvicorn

    from bench.trivial_app import create_trivial_app

    uvicorn.run(create_trivial_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _serve_at(home: str, app_db_url: str | None, threads: int | None, port: int) -> None:
    _serve(home, port, app_db_url, threads)


def _showback_path(home: Path) -> str:
    return "/v1/showback?group_by=namespace"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, help="a gpufinops home (default: the mini test warehouse in a temp dir)")
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of load before the clock starts")
    ap.add_argument("--client-procs", type=int, default=1, help="client processes the clients are split over")
    ap.add_argument("--client", choices=["httpx", "raw"], default="httpx",
                    help="httpx.AsyncClient, or a minimal HTTP/1.1 client on asyncio streams (far less client CPU)")
    ap.add_argument("--server-threads", type=int, help="the server's threadpool (default: api.threadpool_size)")
    ap.add_argument("--path", help="the request path (default: the cost of the costliest workload, window 7d)")
    ap.add_argument("--endpoints", default="cost,showback",
                    help="comma list of cost, showback (ignored with --path)")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the trivial FastAPI route (bench/trivial_app.py) measured in the same run")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    args = ap.parse_args(argv)
    from api.auth import TokenStore

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpufinops-api-bench-") as tmp:
        app_db_url = None
        if args.home is None:
            home = Path(tmp) / "home"
            _mini_home(home)
        else:
            home = args.home
            if not (home / "warehouse.duckdb").exists():
                print(f"no warehouse at {home / 'warehouse.duckdb'}; run `gpufinops build` first", file=sys.stderr)
                return 2
            if (home / "app.db").exists():
                shutil.copy2(home / "app.db", Path(tmp) / "app.db")
            app_db_url = f"sqlite:///{Path(tmp) / 'app.db'}"
        tokens = Path(tmp) / "bench-tokens.yaml"
        token = TokenStore(tokens).create("bench", ["finance"])
        os.environ["GPUFINOPS_API_TOKENS_FILE"] = str(tokens)
        if args.path:
            targets = [(f"GET {args.path.split('?')[0]}", args.path)]
        else:
            pick = {"cost": ("GET /v1/workloads/{id}/cost?window=7d", _pick_path),
                    "showback": ("GET /v1/showback?group_by=namespace", _showback_path)}
            targets = [(pick[e][0], pick[e][1](home)) for e in args.endpoints.split(",") if e]
        try:
            if not args.no_baseline:
                rows.append(measure_server(_serve_trivial, (), _free_port(), "/trivial", token, args,
                                           "GET /trivial (bench/trivial_app.py)", probe="/trivial"))
            for label, path in targets:
                rows.append(measure_server(_serve_at, (str(home), app_db_url, args.server_threads), _free_port(),
                                           path, token, args, label))
        except RuntimeError as exc:
            print(str(exc), file=sys.stderr)
            return 1
    base = rows[0]["req_s"] if not args.no_baseline and rows else None
    for r in rows:
        r["ratio_to_trivial"] = round(r["req_s"] / base, 2) if base else None
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
