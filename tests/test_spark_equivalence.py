"""The same dbt project on Apache Spark (local session) and on DuckDB gives the same marts (docs/spark.md).

One Spark build (``gpufinops build --engine spark --full``, in a subprocess: the JVM stays out of the
test process) of a copy of the fixture fleet's lake, data tests included (conservation among them);
then every mart, dim and dq table, read back through the DuckDB views the Spark build publishes as
the home's warehouse (what the read model opens), is compared row for row
with the fixture's DuckDB-built table, numbers to 1e-9 relative. Plus a static check that no
DuckDB-only function is left in models/ outside the dispatch macros (macros/portable.sql and the
engine's own macros).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[1]

# Functions and syntax only DuckDB has (issue 14); each is behind an adapter.dispatch macro.
DUCKDB_ONLY = [
    r"\barg_max\s*\(", r"\barg_min\s*\(", r"\bqualify\b", r"\bunnest\s*\(", r"\bmap_entries\s*\(",
    r"\bmap_concat\s*\(", r"\bmap\s*\(\s*\)", r"\btry_cast\s*\(", r"\bread_parquet\s*\(", r"\bglob\s*\(",
    r"\bdescribe\b", r"\btypeof\s*\(", r"\bto_microseconds\s*\(", r"\bstrftime\s*\(", r"\bduckdb_tables\s*\(",
    r"\bduckdb_columns\s*\(", r"delete\+insert", r"\bstring_agg\s*\(", r"\bmode\s*\(", r"'-infinity'",
    r"\bepoch_us\s*\(", r"\bmake_timestamp\s*\(", r"\bas\s+varchar\b", r"\blist_\w+\s*\(", r"\blist\s*\(",
    r"\bstruct_pack\s*\(", r"\bgrouping\s*\(\s*\w+\s*,", r"\blen\s*\(", r"\bcreate\s+or\s+replace\s+(macro|table)\b",
    r"\blambda\b", r":=", r"\bcoalesce\s*\([^()]*,\s*\[\]\s*\)",
]
_PY_SYNTAX = {r"\blist\s*\(", r"\blen\s*\(", r"\blambda\b", r":="}
# Where they may appear: inside the engine implementations (duckdb__, spark__) of the dispatch macros.
_DISPATCH_DEF = re.compile(r"{%-?\s*macro\s+(?:duckdb|spark)__\w+.*?{%-?\s*endmacro\s*-?%}", re.S)
# and inside a materialisation defined for one adapter (macros/materializations.sql)
_ADAPTER_MATERIALIZATION = re.compile(r"{%-?\s*materialization\s+\w+\s*,\s*adapter\s*=\s*['\"](?:duckdb|spark)['\"].*?"
                                      r"{%-?\s*endmaterialization\s*-?%}", re.S)
_MACRO_CALL = re.compile(r"(\{\{-?\s*|macro\s+|set\s+\w+\s*=\s*)$")

MARTS_SKIP = {"_build_window", "_late_windows"}  # bookkeeping, not a result


def _yml_sql(text: str) -> str:
    """The SQL inside a schema file: data-test expressions and where/condition configs (the
    descriptions are prose); other lines are blanked so line numbers stay right."""
    return "\n".join(line if re.search(r"\b(expression|where|condition|column_name)\s*:", line) else ""
                     for line in text.split("\n"))


def _strip(text: str, python: bool) -> str:
    text = _ADAPTER_MATERIALIZATION.sub("", _DISPATCH_DEF.sub("", text))
    if python:
        return re.sub(r"#[^\n]*|\"\"\"[\s\S]*?\"\"\"", "", text)
    return re.sub(r"{#.*?#}|--[^\n]*", "", text, flags=re.S)


def duckdb_only_uses(paths: list[Path]) -> list[str]:
    found = []
    for p in paths:
        raw = p.read_text()
        text = _strip(_yml_sql(raw) if p.suffix == ".yml" else raw, p.suffix == ".py")
        for pat in DUCKDB_ONLY:
            if p.suffix == ".py" and pat in _PY_SYNTAX:
                continue  # Python's own list() / len() / lambda in a Python model
            for m in re.finditer(pat, text, flags=re.I):
                if _MACRO_CALL.search(text[max(0, m.start() - 40): m.start()]):
                    continue  # {{ arg_max(...) }}: the dispatch macro of that name, not the function
                line = text[: m.start()].count("\n") + 1
                found.append(f"{p.relative_to(ROOT)}:{line}: {m.group(0)}")
    return found


def test_no_duckdb_only_function_in_models():
    files = sorted((ROOT / "models").rglob("*.sql")) + sorted((ROOT / "models").rglob("*.py"))
    # macros/rollups.sql is DuckDB SQL on purpose: the lake writer runs it in DuckDB at landing,
    # whatever engine builds (ingest/rollups.py); no model calls it (checked below)
    files += [p for p in sorted((ROOT / "macros").glob("*.sql")) if p.name != "rollups.sql"]
    files += sorted((ROOT / "tests" / "dbt").glob("*.sql"))
    files += sorted((ROOT / "models").rglob("*.yml"))  # data-test expressions run on both engines too
    assert files
    assert duckdb_only_uses(files) == []
    models = " ".join(p.read_text() for p in (ROOT / "models").rglob("*.sql"))
    assert "rollup_" not in models


def test_the_check_finds_a_duckdb_only_function(tmp_path):
    # the scan above is not vacuous: a model calling arg_max / qualify directly is caught, the
    # duckdb__ implementation of a dispatch macro is not
    bad = tmp_path / "m.sql"
    bad.write_text("select arg_max(a, b) from t qualify row_number() over () = 1\n"
                   "{% macro duckdb__x(a) %}arg_max({{ a }}, 1){% endmacro %}\n"
                   "{% materialization m, adapter='duckdb' %}duckdb_columns(){% endmaterialization %}\n"
                   "{% materialization m, default %}typeof(a){% endmaterialization %}\n")
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        assert [f.split(": ")[1] for f in duckdb_only_uses([bad])] == ["arg_max(", "qualify", "typeof("]
        schema = tmp_path / "m.yml"
        schema.write_text("      description: rebuilt with delete+insert on DuckDB\n"
                          "      - expression_is_true:\n"
                          "          arguments: {expression: \"samples = list_sum(list_transform(h, lambda e: e.n))\"}\n")
        assert [f.split(": ", 1)[1] for f in duckdb_only_uses([schema])] == ["list_sum(", "list_transform(", "lambda"]
    finally:
        ROOT = old


def _java() -> bool:
    return shutil.which("java") is not None


def _equal(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, datetime | date) or isinstance(b, datetime | date):
        return str(a) == str(b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _rows(con, table: str, cols: list[str]) -> list[tuple]:
    order = ", ".join(f'"{c}"' for c in cols)
    return con.execute(f'select {order} from "{table}" order by {order}').fetchall()


@pytest.fixture(scope="module")
def spark_home(fleet, tmp_path_factory):
    if not _java():
        pytest.fail("Java is missing: `make system-deps` installs openjdk-17-jre-headless (Spark needs it)")
    home = tmp_path_factory.mktemp("spark") / "home"
    home.mkdir()
    shutil.copytree(fleet.home / "lake", home / "lake")
    for f in fleet.home.glob("*.yaml"):
        shutil.copy(f, home / f.name)
    env = {**os.environ, "GPUFINOPS_SPARK_DRIVER_MEMORY": "1g"}
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "--home", str(home), "build", "--engine", "spark", "--full", "--no-summary"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500,
    )
    assert proc.returncode == 0, f"spark build failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return home


def compare_warehouses(duck_path: Path, spark_path: Path) -> tuple[int, list[str]]:
    """(rows compared, differences) between every fct_/dim_/dq_ table of two warehouses."""
    duck = duckdb.connect(str(duck_path), read_only=True)
    spark = duckdb.connect(str(spark_path), read_only=True)
    problems: list[str] = []
    compared = 0
    try:
        tables = [r[0] for r in duck.execute(
            "select table_name from duckdb_tables() where schema_name = 'main' and "
            "(table_name like 'fct_%' or table_name like 'dim_%' or table_name like 'dq_%')").fetchall()]
        served = {r[0] for r in spark.execute("select view_name from duckdb_views() where not internal").fetchall()}
        if len(tables) < 10:
            problems.append(f"only {len(tables)} marts on DuckDB")
        problems += [f"{t}: not built by Spark" for t in sorted(set(tables) - served)]
        for t in sorted(set(tables) & served - MARTS_SKIP):
            cols = [r[0] for r in duck.execute(f'describe "{t}"').fetchall()]
            spark_cols = [r[0] for r in spark.execute(f'describe "{t}"').fetchall()]
            if sorted(cols) != sorted(spark_cols):
                problems.append(f"{t}: columns differ: {sorted(set(cols) ^ set(spark_cols))}")
                continue
            a, b = _rows(duck, t, cols), _rows(spark, t, cols)
            if len(a) != len(b):
                problems.append(f"{t}: {len(a)} rows on DuckDB, {len(b)} on Spark")
                continue
            for ra, rb in zip(a, b, strict=True):
                bad = [(c, x, y) for c, x, y in zip(cols, ra, rb, strict=True) if not _equal(x, y)]
                if bad:
                    problems.append(f"{t}: row differs in {bad[:4]}")
                    break
            compared += len(a)
    finally:
        duck.close()
        spark.close()
    return compared, problems


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_spark_builds_every_mart_equal_to_duckdb(fleet, spark_home):
    serving = spark_home / "warehouse.duckdb"  # the published DuckDB views over Spark's Parquet
    assert serving.exists()
    compared, problems = compare_warehouses(fleet.warehouse, serving)
    assert problems == []
    assert compared > 1000
