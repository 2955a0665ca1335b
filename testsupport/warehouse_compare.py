"""Compare two built warehouses table by table (for tests: incremental = full, worker = in-process)."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb

__all__ = ["BOOKKEEPING", "assert_same_tables", "tables"]

BOOKKEEPING = {"_build_window", "_late_windows"}  # tables of the build itself, not of the data


def tables(path: Path | str) -> dict[str, list[tuple]]:
    """Every table of schema main (but the build's bookkeeping) and its rows."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [r[0] for r in con.sql(
            "select table_name from duckdb_tables() where schema_name = 'main' order by 1").fetchall()]
        return {n: con.sql(f'select * from "{n}"').fetchall() for n in names if n not in BOOKKEEPING}
    finally:
        con.close()


def _key(row: tuple) -> tuple:
    return tuple(("", "") if v is None else (type(v).__name__, round(v, 6) if isinstance(v, float) else str(v)) for v in row)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    return a == b


def assert_same_tables(got_path: Path | str, want_path: Path | str, must_have: set[str] = frozenset()) -> None:
    """The same tables with the same rows (in any order; floats to 1e-9 relative)."""
    got, want = tables(got_path), tables(want_path)
    assert set(got) == set(want)
    assert must_have <= set(got), must_have - set(got)
    for name in sorted(want):
        g, w = sorted(got[name], key=_key), sorted(want[name], key=_key)
        assert len(g) == len(w), (name, len(g), len(w))
        for rg, rw in zip(g, w, strict=True):
            assert all(_same(a, b) for a, b in zip(rg, rw, strict=True)), (name, rg, rw)
