"""``make bench``: generate the fleet at each scale and measure every stage (wall time, peak RSS).

Scales (DESIGN §6): ``small`` = 100 nodes × 8 GPUs × 30 days, ``large`` = 1,000 nodes × 8 GPUs ×
30 days at 60 s DCGM resolution (345.6 M GPU samples). Pick with ``BENCH_SCALES=small,large``
(default: both). Results go to ``bench/out/results.{json,md}``; nothing here asserts a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from bench.measure import StageResult, run_stage
from bench.queries import HEAVY_QUERIES

OUT = Path(__file__).resolve().parent / "out"
SCALES = {
    "small": {"nodes": 100, "days": 30},
    "large": {"nodes": 1000, "days": 30},
}


def _cli(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", "--home", str(home), *args]


def bench_scale(scale: str, spec: dict[str, int]) -> list[StageResult]:
    home = Path(os.environ.get("BENCH_HOME", "/tmp/gpufinops-bench")) / scale
    results: list[StageResult] = []
    nodes, days = spec["nodes"], spec["days"]
    gen_args = ["demo", "--nodes", str(nodes), "--gpus-per-node", "8", "--days", str(days),
                "--k8s-interval", "300", "--hold-last-hour"]
    if not os.environ.get("BENCH_REUSE"):
        subprocess.run(["rm", "-rf", str(home)], check=True)
        results.append(run_stage("demo generation", scale, _cli(home, *gen_args),
                                 detail=f"{nodes} nodes × 8 GPUs × {days} d, DCGM 60 s, k8s snapshots 300 s"))
    results.append(run_stage("full build", scale, _cli(home, "build", "--full"), detail="dbt seed + build + tests"))
    results.append(run_stage("ingest last hour", scale, _cli(home, *gen_args, "--only-last-hour"),
                             detail="the held-back final hour lands in the lake"))
    results.append(run_stage("incremental hour", scale, _cli(home, "build"), detail="dbt build, incremental"))
    for name in HEAVY_QUERIES:
        proc = subprocess.run([sys.executable, "-m", "bench.query_stage", str(home / "warehouse.duckdb"), name],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            q = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(StageResult(f"query {name}", scale, q["warm_s"], 0, True, f"cold {q['cold_s']} s, {q['rows']} rows"))
        else:
            results.append(StageResult(f"query {name}", scale, 0, 0, False, proc.stderr[-300:]))
    return results


def _markdown(results: list[StageResult]) -> str:
    lines = ["| scale | stage | wall (s) | peak RSS (MB) | ok | detail |", "|---|---|---:|---:|---|---|"]
    for r in results:
        rss = f"{r.peak_rss_mb:.0f}" if r.peak_rss_mb else "—"
        lines.append(f"| {r.scale} | {r.stage} | {r.wall_s} | {rss} | {'yes' if r.ok else 'NO'} | {r.detail} |")
    return "\n".join(lines)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    scales = os.environ.get("BENCH_SCALES", "small,large").split(",")
    results: list[StageResult] = []
    for scale in scales:
        results += bench_scale(scale, SCALES[scale])
        (OUT / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
        (OUT / "results.md").write_text(_markdown(results) + "\n")
    print(_markdown(results))


if __name__ == "__main__":
    main()
