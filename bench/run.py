"""``make bench``: generate the fleet at each scale and measure every stage (wall time, peak RSS).

Scales (DESIGN §6): ``small`` = 100 nodes × 8 GPUs × 30 days, ``large`` = 1,000 nodes × 8 GPUs ×
30 days at 60 s DCGM resolution (345.6 M GPU samples), ``tiny`` = 10 nodes × 2 days (a quick check that
every stage runs). Pick with ``BENCH_SCALES=small,large`` (default: small, large, extras, spark);
``BENCH_NODES`` / ``BENCH_DAYS`` override the fleet size of the scales picked, ``BENCH_K8S_INTERVAL`` (default 300;
60 is the product default) the Kubernetes snapshot interval (its runs are labelled ``<scale>-k8s60``), ``BENCH_API_SECONDS``
the API load's measured seconds per endpoint (default 20), ``BENCH_WORKER_HOURS`` the hours the build worker builds in a row (default 3), ``BENCH_SKIP`` stages to leave out (comma-separated:
``recommender``, ``consolidation``, ``simulator``). Results go to
``bench/out/results.{json,md}``; nothing here asserts a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.measure import StageResult, run_stage
from bench.queries import HEAVY_QUERIES

OUT = Path(__file__).resolve().parent / "out"
SCALES = {
    "tiny": {"nodes": 10, "days": 2},
    "small": {"nodes": 100, "days": 30},
    "large": {"nodes": 1000, "days": 30},
}


def _spec(scale: str) -> dict[str, int]:
    spec = dict(SCALES[scale])
    for key, env in (("nodes", "BENCH_NODES"), ("days", "BENCH_DAYS")):
        if os.environ.get(env):
            spec[key] = int(os.environ[env])
    return spec


def _cli(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", "--home", str(home), *args]


def bench_scale(scale: str, spec: dict[str, int]) -> list[StageResult]:
    k8s = int(os.environ.get("BENCH_K8S_INTERVAL", "300"))  # 60: the product's default snapshot interval
    tag = scale if k8s == 300 else f"{scale}-k8s{k8s}"
    home = Path(os.environ.get("BENCH_HOME", "/tmp/gpufinops-bench")) / tag
    results: list[StageResult] = []
    nodes, days = spec["nodes"], spec["days"]
    gen_args = ["demo", "--nodes", str(nodes), "--fleet", "bench", "--days", str(days),
                "--k8s-interval", str(k8s)]
    gen_file = OUT / f"generation_{tag}.json"
    scale = tag
    if os.environ.get("BENCH_REUSE") and gen_file.exists():
        # Reuse the lake (and the measurement) of an earlier generation at this scale, taking its
        # last 1 + BENCH_WORKER_HOURS hours out again so the hourly stages have something new to build.
        results.append(StageResult(**json.loads(gen_file.read_text())))
        # in a child process: the lake writer's peak would otherwise become this process's, which every
        # later stage's child starts from (run_stage then cannot measure their peaks)
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from bench.run import _clear_tail; "
                        "_clear_tail(Path(sys.argv[1]), int(sys.argv[2]), hours=int(sys.argv[3]))",
                        str(home / "lake"), str(days), str(1 + _worker_hours())], check=True)
        subprocess.run(["rm", "-f", str(home / "warehouse.duckdb")], check=True)
    else:
        subprocess.run(["rm", "-rf", str(home)], check=True)
        gen = run_stage("demo generation", scale, _cli(home, *gen_args, "--hold-back-hours", str(1 + _worker_hours())),
                        detail=f"{nodes} nodes × 8 GPUs × {days} d, DCGM 60 s, k8s snapshots {k8s} s")
        gen_file.write_text(json.dumps(asdict(gen)))
        results.append(gen)
        if os.environ.get("BENCH_GENERATE_ONLY"):
            return results
    results.append(_rows(home, scale))
    results.append(run_stage("full build", scale, _cli(home, "build", "--full"), detail="dbt seed + build + tests"))
    results += _hours(home, scale, gen_args)
    results.append(_api_during_build(scale, home))
    skip = set(filter(None, os.environ.get("BENCH_SKIP", "").split(",")))
    if "recommender" not in skip:
        results.append(run_stage("recommender", scale, _cli(home, "recommend", "--dry-run"),
                                 detail="every strategy over the warehouse and lake, nothing written"))
    results.append(_page_times(home, scale))
    results += _api_load(scale, home)
    for name in HEAVY_QUERIES:
        proc = subprocess.run([sys.executable, "-m", "bench.query_stage", str(home / "warehouse.duckdb"), name],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            q = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(StageResult(f"query {name}", scale, q["warm_s"], 0, True, f"cold {q['cold_s']} s, {q['rows']} rows"))
        else:
            results.append(StageResult(f"query {name}", scale, 0, 0, False, proc.stderr[-300:]))
    return results


def _worker_hours() -> int:
    """How many hours the build worker builds in a row (``BENCH_WORKER_HOURS``, default 3): one hour's
    time varies by a second or two from hour to hour, so the bench reports each and their median."""
    return max(1, int(os.environ.get("BENCH_WORKER_HOURS", "3")))


def _land(home: Path, scale: str, gen_args: list[str], i: int, held: int) -> StageResult:
    """Land held-back hour ``i`` of ``held`` (1-based; the demo's last ``held`` hours are held back)."""
    return run_stage(f"land hour {i} of {held}", scale,
                     _cli(home, *gen_args, "--hold-back-hours", str(held - i + 1), "--tail-only", "--tail-hours", "1"),
                     detail=f"held-back hour {i} of {held} lands")


def _hours(home: Path, scale: str, gen_args: list[str]) -> list[StageResult]:
    """The hourly step: the first held-back hour lands and ``gpufinops build --in-process`` builds
    it (interpreter, imports and dbt's parse in the measured process); then a build worker starts
    (``gpufinops serve builder``), and ``BENCH_WORKER_HOURS`` times: the worker's spare copy of the live
    version is made (as it is an hour after a build), the next hour lands, and ``gpufinops build``
    hands the build to the worker. An hour's figure is the wall time of the whole ``gpufinops build``
    process; its memory is the larger of that process's peak and the worker's peak during the build
    (VmHWM, reset first). A last stage reports the median over the worker's hours."""
    n = _worker_hours()
    held = 1 + n
    out = [_land(home, scale, gen_args, 1, held),
           run_stage("incremental hour, in-process", scale, _cli(home, "build", "--in-process"),
                     detail="a fresh process: imports, dbt parse check, build, publish, summary")]
    t0 = time.perf_counter()
    worker = subprocess.Popen(_cli(home, "serve", "builder"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from gpufinops.warehouse import live_file
        from transform.publish import spare_path
        from transform.worker import worker_alive

        while worker_alive(home) is None:
            if worker.poll() is not None or time.perf_counter() - t0 > 300:
                return out + [StageResult("build worker start", scale, 0, 0, False, "the worker did not come up")]
            time.sleep(0.2)
        out.append(StageResult("build worker start (imports + parse, once)", scale, round(time.perf_counter() - t0, 1),
                               round(_rss_mb(worker.pid, "VmRSS"), 0), True, "`gpufinops serve builder`; RSS when ready"))
        hours: list[StageResult] = []
        for i in range(2, held + 1):
            # steady state: an hour after a build, the worker's spare copy of the live version is ready
            # (transform.publish.make_spare); here the last build ended seconds ago, so wait for it
            t1 = time.perf_counter()
            spare = spare_path(live_file(home / "warehouse.duckdb"))
            while not spare.exists() and time.perf_counter() - t1 < 300 and worker.poll() is None:
                time.sleep(0.2)
            out.append(StageResult("build worker's spare copy of the live version", scale, round(time.perf_counter() - t1, 1),
                                   0, spare.exists(), f"{spare.stat().st_size / 1e9:.2f} GB, copied and synced in the background"
                                   if spare.exists() else "not made"))
            out.append(_land(home, scale, gen_args, i, held))
            Path(f"/proc/{worker.pid}/clear_refs").write_text("5")  # reset the worker's VmHWM
            hour = run_stage(f"incremental hour {i - 1} of {n}, build worker", scale, _cli(home, "build"),
                             detail="the whole `gpufinops build` process (the build runs in the worker)")
            worker_peak = _rss_mb(worker.pid, "VmHWM")
            hour.detail += f"; client peak {hour.peak_rss_mb:.0f} MB, worker peak {worker_peak:.0f} MB during the build"
            hour.peak_rss_mb = max(hour.peak_rss_mb, round(worker_peak, 0))
            out.append(hour)
            hours.append(hour)
        walls = sorted(h.wall_s for h in hours)
        out.append(StageResult("incremental hour, build worker (median)", scale, walls[len(walls) // 2],
                               max(h.peak_rss_mb for h in hours), all(h.ok for h in hours),
                               f"{len(hours)} hours in a row: " + " / ".join(f"{h.wall_s} s" for h in hours)))
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    return out


def _rss_mb(pid: int, field: str) -> float:
    """A process's VmRSS / VmHWM (/proc/<pid>/status), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _rows(home: Path, scale: str) -> StageResult:
    """Row counts of the big landing tables and their rollups (bench/lake_rows.py, in a child process:
    a Linux child inherits its parent's peak RSS, so this process stays small)."""
    proc = subprocess.run([sys.executable, "-m", "bench.lake_rows", str(home / "lake")], capture_output=True, text=True)
    if proc.returncode != 0:
        return StageResult("lake rows", scale, 0, 0, False, proc.stderr[-300:])
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    return StageResult("lake rows", scale, 0, 0, True, ", ".join(f"{t} {n:,}" for t, n in counts.items()))


def _clear_tail(lake: Path, days: int, hours: int = 1) -> None:
    """Empty the demo's last ``hours`` hours in every cluster (the slices ``--tail-only`` lands)."""
    from datetime import timedelta

    from ingest.demo.generate import DEMO_TABLES, DemoOptions
    from ingest.lake import LakeWriter
    from ingest.schema import TABLES

    start = DemoOptions().window[0]
    end = start + timedelta(days=days)
    writer = LakeWriter(lake)
    for cdir in sorted((lake / "k8s_pods").glob("cluster=*")):
        with writer.run("demo", cdir.name.split("=", 1)[1], end - timedelta(hours=hours), end) as run:
            for t in DEMO_TABLES:
                run.add(t, TABLES[t].schema.empty_table())


def _page_times(home: Path, scale: str) -> StageResult:
    code = ("import json,sys; from bench.pages import time_pages_detail; from gpufinops.settings import Settings; "
            "s=Settings(); print(json.dumps(time_pages_detail(sys.argv[1], tuple(s.cost.shared_namespaces))))")
    proc = subprocess.run([sys.executable, "-c", code, str(home / "warehouse.duckdb")], capture_output=True, text=True)
    if proc.returncode != 0:
        return StageResult("dashboard page queries", scale, 0, 0, False, proc.stderr[-300:])
    pages = json.loads(proc.stdout.strip().splitlines()[-1])  # {page: {median_ms, min_ms, cpu_ms}}
    worst_s = max(t["median_ms"] for t in pages.values()) / 1000
    return StageResult("dashboard page queries (slowest page)", scale, round(worst_s, 3), 0, True,
                       "median of 5, all queries of a page, no cache: " + ", ".join(
                           f"{k} {t['median_ms']:.0f} ms (min {t['min_ms']:.0f}, CPU {t['cpu_ms']:.0f})"
                           for k, t in pages.items()))


def _api_during_build(scale: str, home: Path) -> StageResult:
    """8 clients on the API without pause during an incremental build (bench/api_during_build.py)."""
    out_json = OUT / f"api_during_build_{scale}.json"
    out_json.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-m", "bench.api_during_build", "--home", str(home), "--json", str(out_json)],
                          capture_output=True, text=True)
    if not out_json.exists():
        return StageResult("API during a build", scale, 0, 0, False, (proc.stderr or proc.stdout)[-300:])
    r = json.loads(out_json.read_text())
    return StageResult("API during an incremental build (8 clients)", scale, r["build_s"], 0,
                       r["build_ok"] and r["non_2xx"] == 0,
                       f"{r['requests']} requests, {r['non_2xx']} non-2xx, {r['versions_seen']} warehouse versions seen")


def _api_load(scale: str, home: Path | None) -> list[StageResult]:
    """200 concurrent clients for ``BENCH_API_SECONDS`` (20) s per endpoint, each server (uvicorn) in its
    own process on loopback: the trivial FastAPI baseline first, then the cost and showback endpoints;
    one stage per endpoint, with the server's and the load generator's CPU and the ratio to the baseline."""
    seconds = os.environ.get("BENCH_API_SECONDS", "20")
    out_json = OUT / f"api_load_{scale.replace(' ', '_')}.json"
    argv = [sys.executable, "-m", "bench.api_load", "--clients", "200", "--seconds", seconds, "--client", "raw",
            "--json", str(out_json)]
    if home is not None:
        argv += ["--home", str(home)]
    out_json.unlink(missing_ok=True)
    proc = subprocess.run(argv, capture_output=True, text=True)
    if not out_json.exists():
        return [StageResult("API load", scale, 0, 0, False, (proc.stderr or proc.stdout)[-300:])]
    results = []
    for row in json.loads(out_json.read_text()):
        detail = ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("endpoint", "seconds", "path"))
        # ok = no failed request
        results.append(StageResult(f"API load {row['endpoint']} (200 clients, {seconds} s)", scale, row["seconds"],
                                   row["server_peak_rss_mb"] or 0, row["errors"] == 0, detail))
    return results


def _extras() -> list[StageResult]:
    """Benchmarks that do not depend on a scale: PromQL vs warehouse, openb consolidation."""
    out = []
    skip = set(filter(None, os.environ.get("BENCH_SKIP", "").split(",")))
    code_prom = "import json; from dataclasses import asdict; from bench.promql_vs_warehouse import main; f=main(); print(json.dumps(asdict(f), default=str))"
    out.append(run_stage("PromQL vs warehouse", "200 GPUs × 7 d", [sys.executable, "-c", code_prom],
                         detail="see bench/out/promql_vs_warehouse.md"))
    code_cons = "import json; from bench.consolidation_openb import main; r=main(); print(json.dumps(r, default=str)); open('bench/out/consolidation_openb.json','w').write(json.dumps(r, default=str, indent=2))"
    if "consolidation" not in skip:
        out.append(run_stage("consolidation, openb 1,213 nodes", "openb", [sys.executable, "-c", code_cons],
                             detail="see bench/out/consolidation_openb.json"))
    if "simulator" not in skip:
        out.append(run_stage("simulator fidelity, openb 3 traces × 6 policies × 10 seeds", "openb",
                             [sys.executable, "-m", "bench.simulator_openb"], detail="see bench/out/simulator_openb.md"))
    out += _api_load("mini test warehouse", None)
    return out


def _spark() -> list[StageResult]:
    """The small fleet built by Spark local beside DuckDB (bench/spark_vs_duckdb.py)."""
    from bench.spark_vs_duckdb import main as spark_main

    r = spark_main([])
    scale = f"{r['nodes']} nodes × {r['days']} d"
    out = []
    for engine, e in r["engines"].items():
        rows = sum(e["rows"].values())
        out.append(StageResult(f"full build, {engine}", scale, e["wall_s"], e["peak_rss_mb"], e["ok"],
                               f"{len(e['rows'])} marts, {rows} rows; see bench/out/spark_vs_duckdb.md"))
    return out


def _markdown(results: list[StageResult]) -> str:
    lines = ["| scale | stage | wall (s) | peak RSS (MB) | ok | detail |", "|---|---|---:|---:|---|---|"]
    for r in results:
        rss = f"{r.peak_rss_mb:.0f}" if r.peak_rss_mb else "—"
        lines.append(f"| {r.scale} | {r.stage} | {r.wall_s} | {rss} | {'yes' if r.ok else 'NO'} | {r.detail} |")
    return "\n".join(lines)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    scales = os.environ.get("BENCH_SCALES", "small,large,extras,spark").split(",")
    results: list[StageResult] = []
    for scale in scales:
        if scale == "extras":
            results += _extras()
        elif scale == "spark":
            results += _spark()
        else:
            results += bench_scale(scale, _spec(scale))
        (OUT / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
        (OUT / "results.md").write_text(_markdown(results) + "\n")
    print(_markdown(results))


if __name__ == "__main__":
    main()
