"""One model's compiled SQL, alone, on a copy of a built warehouse: its CPU-seconds as ``CREATE TABLE AS``
and, from a second run with DuckDB's JSON profiling on, its operators, largest first.

    python -m bench.profile_model <home> <model> [--threads N] [--top N] [--no-explain] [--sql FILE] [--set NAME=VALUE] [--temp]

Reads the compiled SQL the last build left in ``<home>/dbt/target/compiled`` (or ``--sql``): after an hourly
build that is the model's incremental query, so run a full build first to profile a full one. Copies the live
warehouse version to ``<home>/_profile/_building.duckdb`` once (``--fresh`` copies it again), and runs the query there
with the lake's ``filename`` glob as the build does. Nothing in the live warehouse changes.

``--temp`` writes the timed ``CREATE TABLE AS`` into an in-memory temp table instead of the warehouse file: the
difference between the two is what DuckDB's compressing and appending of the table's columns costs.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import time
from pathlib import Path

import duckdb


def _compiled(home: Path, model: str) -> str:
    hits = list((home / "dbt" / "target" / "compiled").rglob(f"{model}.sql"))
    if not hits:
        raise SystemExit(f"no compiled SQL for {model} under {home}/dbt/target/compiled (run a full build first)")
    return hits[0].read_text()


def _operators(plan: dict, out: list[tuple[float, str, int]]) -> None:
    name = plan.get("name") or "?"
    timing = plan.get("timing") or 0.0
    rows = plan.get("intermediate_rows") or 0
    extra = plan.get("extra_info") or {}
    label = name.strip()
    if isinstance(extra, dict):
        for key in ("Table", "Function", "Join Type", "Conditions", "Aggregates", "Groups", "Projections"):
            if key in extra:
                label += f" {key}={str(extra[key])[:70]}"
    out.append((timing, label, rows))
    for child in plan.get("children", []):
        _operators(child, out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("home")
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--sql")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--no-explain", action="store_true")
    ap.add_argument("--temp", action="store_true", help="time the query into an in-memory temp table (no table write)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a DuckDB setting for the query (repeatable), e.g. allocator_flush_threshold=2GB")
    args = ap.parse_args()
    home = Path(args.home)
    copy = home / "_profile" / "_building.duckdb"  # the catalog name the compiled SQL uses
    if args.fresh or not copy.exists():
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile((home / "warehouse.duckdb").resolve(), copy)
    sql = Path(args.sql).read_text() if args.sql else _compiled(home, args.model)
    con = duckdb.connect(str(copy))
    con.execute(f"set threads = {args.threads}")
    con.execute("set preserve_insertion_order = false")
    for setting in args.set:
        name, _, value = setting.partition("=")
        quoted = value.strip().replace("'", "''")
        con.execute(f"set {name.strip()} = '{quoted}'")
    con.execute(f"drop table if exists _p_{args.model}")
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    con.execute(f"create {'temp ' if args.temp else ''}table _p_{args.model} as {sql}")
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    rows = con.execute(f"select count(*) from _p_{args.model}").fetchone()[0]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"{args.model}: CTAS{' (temp table)' if args.temp else ''} {wall:.2f} s wall, {cpu:.2f} CPU-s ({after.ru_utime - before.ru_utime:.2f} user), "
          f"{rows:,} rows, peak RSS {after.ru_maxrss / 1024:.0f} MB, {args.threads} thread(s)")
    con.execute(f"drop table _p_{args.model}")
    if args.no_explain:
        return
    con.execute("pragma enable_profiling = 'json'")
    con.execute(f"pragma profiling_output = '{home / '_profile.json'}'")
    con.execute(f"create or replace temp table _p_explained as {sql}")
    plan = json.loads((home / "_profile.json").read_text())
    con.execute("pragma disable_profiling")
    con.execute("drop table _p_explained")
    ops: list[tuple[float, str, int]] = []
    for child in plan.get("operator", []):
        _operators(child, ops)
    total = sum(t for t, _, _ in ops) or 1.0
    print(f"operators: {total:.2f} s in all")
    for timing, label, n in sorted(ops, reverse=True)[: args.top]:
        label = re.sub(r"\s+", " ", label)
        print(f"  {timing:7.2f}  {100 * timing / total:5.1f} %  {n:>12,}  {label}")


if __name__ == "__main__":
    main()
