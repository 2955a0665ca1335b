"""A bounded load test of the API on loopback: N concurrent clients (asyncio + httpx) against a uvicorn
server for S seconds, on GET /v1/workloads/{id}/cost; prints requests, req/s, p50/p95/p99 ms, errors
as a markdown row.

    python -m bench.api_load [--home DIR] [--clients 200] [--seconds 20] [--path PATH]

Without ``--home`` it builds the dashboards' mini test warehouse and app DB in a temp folder. The
server runs in a child process (so client and server do not share one event loop); a token with the
finance role is created for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import multiprocessing
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

__all__ = ["main", "run_load"]

_ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(home: str, port: int) -> None:
    import uvicorn

    from api.app import create_app
    from gpufinops.settings import Settings

    uvicorn.run(create_app(Settings(home=Path(home))), host="127.0.0.1", port=port, log_level="warning",
                access_log=False)


def _mini_home(home: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_dash_support",
                                                  _ROOT / "tests/fixtures/dashboards/support.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.build_warehouse(home)
    mod.build_app_db(home)


def _pick_path(home: Path) -> str:
    from gpufinops.appdb.ids import workload_id
    from gpufinops.warehouse import connect

    con = connect(home / "warehouse.duckdb")
    try:
        row = con.execute("select cluster, namespace, workload_kind, workload from fct_gpu_allocation_hourly "
                          "group by all order by sum(total_cost_usd) desc limit 1").fetchone()
    finally:
        con.close()
    assert row is not None, "the warehouse has no workloads"
    return f"/v1/workloads/{workload_id(*row)}/cost?window=7d"


async def run_load(base: str, path: str, token: str, clients: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, limits=limits,
                                 timeout=30.0) as client:

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                try:
                    r = await client.get(path)
                    ok = r.status_code == 200
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - t0)
                if not ok:
                    errors += 1

        t_start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - t_start
    qs = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else [latencies[0] if latencies else 0.0] * 99
    return {"requests": len(latencies), "seconds": elapsed, "rps": len(latencies) / elapsed if elapsed else 0.0,
            "p50_ms": qs[49] * 1000, "p95_ms": qs[94] * 1000, "p99_ms": qs[98] * 1000, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, help="a gpufinops home (default: the mini test warehouse in a temp dir)")
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--path", help="the request path (default: the cost of the costliest workload)")
    args = ap.parse_args(argv)
    from api.auth import TokenStore

    with tempfile.TemporaryDirectory(prefix="gpufinops-api-bench-") as tmp:
        home = args.home or Path(tmp) / "home"
        if args.home is None:
            _mini_home(home)
        tokens = Path(tmp) / "bench-tokens.yaml"
        token = TokenStore(tokens).create("bench", ["finance"])
        path = args.path or _pick_path(home)
        port = _free_port()
        import os

        os.environ["GPUFINOPS_API_TOKENS_FILE"] = str(tokens)
        proc = multiprocessing.get_context("spawn").Process(target=_serve, args=(str(home), port), daemon=True)
        proc.start()
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    if httpx.get(base + "/healthz", timeout=1).status_code in (200, 503):
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            else:
                print("the API server did not start", file=sys.stderr)
                return 1
            res = asyncio.run(run_load(base, path, token, args.clients, args.seconds))
        finally:
            proc.terminate()
            proc.join(10)
    print("| endpoint | clients | seconds | requests | req/s | p50 ms | p95 ms | p99 ms | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| GET {path.split('?')[0].rsplit('/', 2)[0]}/{{id}}/cost | {args.clients} | {res['seconds']:.1f} | "
          f"{int(res['requests'])} | {res['rps']:.0f} | {res['p50_ms']:.1f} | {res['p95_ms']:.1f} | "
          f"{res['p99_ms']:.1f} | {int(res['errors'])} |")
    return 0 if res["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
