"""Where a build's time goes: one ``gpufinops build`` (incremental, or ``--full``) through
``transform.run_build``, then dbt's per-node times, largest first.

    python -m bench.profile_build <home> [--full] [--top N]

Node seconds are dbt's own execution times; with 2 dbt threads they add up to about twice the wall.
"""

from __future__ import annotations

import argparse
import time

from gpufinops.settings import Settings
from transform.runner import run_build


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("home")
    ap.add_argument("--full", action="store_true", help="a full build (dbt --full-refresh)")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    started = time.perf_counter()
    result = run_build(Settings(home=args.home), full_refresh=args.full)
    wall = time.perf_counter() - started
    total = sum(n.seconds for n in result.nodes)
    print(f"wall {wall:.1f} s (dbt {result.seconds:.1f}, copy {result.copy_seconds:.2f}, rollups "
          f"{result.rollup_seconds:.2f}); {len(result.nodes)} nodes, {total:.1f} node-seconds")
    by_type: dict[str, list[float]] = {}
    for n in result.nodes:
        by_type.setdefault(n.resource_type, []).append(n.seconds)
    print("by type: " + ", ".join(f"{t} {len(s)} nodes {sum(s):.1f} s" for t, s in sorted(by_type.items())))
    for n in sorted(result.nodes, key=lambda n: -n.seconds)[: args.top]:
        print(f"{n.seconds:8.2f}  {100 * n.seconds / total:5.1f} %  {n.resource_type:9} {n.name}")


if __name__ == "__main__":
    main()
