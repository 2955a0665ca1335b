"""Spark local beside DuckDB: the same dbt project, the same lake, full build (models + data tests).

``python -m bench.spark_vs_duckdb [--nodes N --days D --clusters C]`` generates a demo fleet, builds it
with ``gpufinops build --full`` (DuckDB) and ``gpufinops build --full --engine spark`` (local session),
and reports wall time, peak memory of the whole process tree (the JVM is a child of the build
process, so ru_maxrss of the child alone would miss it: /proc is sampled every 0.2 s) and the row
count of every mart on both. ``make bench`` runs it at the small scale (``BENCH_SCALES`` has ``spark``).
Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb

OUT = Path(__file__).resolve().parent / "out"


def _tree_rss_kb(pid: int) -> int:
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def measure(argv: list[str]) -> tuple[float, float, int]:
    """(wall s, peak RSS MB of the process tree, exit code)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(0.2)
    proc.stderr.read()
    return time.perf_counter() - t0, peak / 1024, proc.returncode


def mart_rows(path: Path) -> dict[str, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [r[0] for r in con.execute(
            "select table_name from information_schema.tables where table_schema = 'main' and "
            "(table_name like 'fct_%' or table_name like 'dim_%' or table_name like 'dq_%') order by 1").fetchall()]
        return {n: con.execute(f'select count(*) from "{n}"').fetchone()[0] for n in names}
    finally:
        con.close()


def run(nodes: int, days: int, clusters: int, home: Path) -> dict:
    cli = [sys.executable, "-m", "cli.main", "--home", str(home)]
    subprocess.run(["rm", "-rf", str(home)], check=True)
    subprocess.run([*cli, "demo", "--nodes", str(nodes), "--days", str(days), "--clusters", str(clusters),
                    "--seed", "42"], check=True, stdout=subprocess.DEVNULL)
    out: dict = {"nodes": nodes, "days": days, "clusters": clusters, "engines": {}}
    for engine, extra, served in [("duckdb", [], home / "warehouse.duckdb"),
                                  ("spark", ["--engine", "spark"], home / "warehouse.duckdb")]:
        wall, rss, rc = measure([*cli, "build", "--full", "--no-summary", *extra])
        out["engines"][engine] = {"wall_s": round(wall, 1), "peak_rss_mb": round(rss), "ok": rc == 0,
                                  "rows": mart_rows(served) if rc == 0 else {}}
    return out


def markdown(r: dict) -> str:
    d, s = r["engines"]["duckdb"], r["engines"]["spark"]
    lines = [f"Fleet: {r['nodes']} nodes × {r['days']} d, {r['clusters']} clusters (demo generator, seed 42).", "",
             "| engine | full build wall (s) | peak RSS, process tree (MB) | ok |", "|---|---:|---:|---|",
             f"| DuckDB | {d['wall_s']} | {d['peak_rss_mb']} | {d['ok']} |",
             f"| Spark local[2] | {s['wall_s']} | {s['peak_rss_mb']} | {s['ok']} |", "",
             "| mart | rows DuckDB | rows Spark |", "|---|---:|---:|"]
    for name in sorted(set(d["rows"]) | set(s["rows"])):
        lines.append(f"| {name} | {d['rows'].get(name, '—')} | {s['rows'].get(name, '—')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--clusters", type=int, default=2)
    ap.add_argument("--home", type=Path, default=Path(os.environ.get("BENCH_HOME", "/tmp/gpufinops-bench")) / "spark")
    a = ap.parse_args(argv)
    r = run(a.nodes, a.days, a.clusters, a.home)
    OUT.mkdir(exist_ok=True)
    (OUT / "spark_vs_duckdb.json").write_text(json.dumps(r, indent=2))
    (OUT / "spark_vs_duckdb.md").write_text(markdown(r) + "\n")
    print(markdown(r))
    return r


if __name__ == "__main__":
    main()
