"""How a full build's dbt nodes shared the threads: read ``<home>/dbt/target/run_results.json`` (a full
build leaves it) and print how long 0, 1, 2 ... nodes ran at once, the longest stretches with one node
running, and the critical path through the manifest's dependencies.

    python -m bench.build_timeline <home> [--top N]

The critical path is the chain of parents whose node times add up to the most; it is a floor on the
wall time of the node phase, whatever the order and the threads.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _spans(results: list[dict]) -> dict[str, tuple[float, float]]:
    spans = {}
    for r in results:
        times = [t for t in r.get("timing", []) if t.get("started_at") and t.get("completed_at")]
        if times:
            spans[r["unique_id"]] = (min(_ts(t["started_at"]) for t in times), max(_ts(t["completed_at"]) for t in times))
    return spans


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("home")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    target = Path(args.home) / "dbt" / "target"
    results = json.loads((target / "run_results.json").read_text())["results"]
    manifest = json.loads((target / "manifest.json").read_text())
    spans = _spans(results)
    t0 = min(s for s, _ in spans.values())
    events = sorted([(s, 1) for s, _ in spans.values()] + [(e, -1) for _, e in spans.values()])
    running, last, level_time, singles = 0, t0, {}, []
    for t, d in events:
        level_time[running] = level_time.get(running, 0.0) + t - last
        if running == 1 and t - last > 0.5:
            alone = [u for u, (s, e) in spans.items() if s <= last + 1e-6 and e >= t - 1e-6]
            singles.append((t - last, last - t0, alone[0] if alone else "?"))
        running += d
        last = t
    end = max(e for _, e in spans.values())
    print(f"node phase {end - t0:.1f} s, {len(spans)} nodes, {sum(e - s for s, e in spans.values()):.1f} node-seconds")
    for level in sorted(level_time):
        print(f"  {level} running: {level_time[level]:6.1f} s")
    print("longest stretches with one node running (seconds, from, node):")
    for length, at, node in sorted(singles, reverse=True)[: args.top]:
        print(f"  {length:6.1f}  at {at:6.1f}  {node.split('.')[-1]}")
    print("largest nodes (start, end, seconds):")
    for u, (s, e) in sorted(spans.items(), key=lambda kv: kv[1][0] - kv[1][1])[: args.top]:
        print(f"  {s - t0:6.1f} {e - t0:6.1f} {e - s:6.1f}  {u.split('.')[-1]}")
    parents = {u: [p for p in manifest.get("parent_map", {}).get(u, []) if p in spans] for u in spans}
    best: dict[str, tuple[float, str | None]] = {}

    def path(u: str) -> tuple[float, str | None]:
        if u not in best:
            own = spans[u][1] - spans[u][0]
            tail = max(((path(p)[0], p) for p in parents[u]), default=(0.0, None))
            best[u] = (own + tail[0], tail[1])
        return best[u]

    for u in sorted(spans, key=lambda u: spans[u][0]):  # parents first keeps the recursion shallow
        path(u)
    u, total = max(best.items(), key=lambda kv: kv[1][0])[0], max(v[0] for v in best.values())
    print(f"critical path {total:.1f} s:")
    chain = []
    while u is not None:
        chain.append(u)
        u = best[u][1]
    for u in reversed(chain):
        print(f"  {spans[u][1] - spans[u][0]:6.1f}  {u.split('.')[-1]}")


if __name__ == "__main__":
    main()
