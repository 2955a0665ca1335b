"""The project's incremental and table materialisations on DuckDB (macros/materializations.sql), in a tiny dbt
project that uses the real macro files: what it inserts and deletes, schema changes, Python models,
the leftovers it must not leave, and the configurations it refuses.

The warehouse models themselves are covered by tests/test_warehouse_incremental.py (incremental =
full, row for row); here each behaviour is isolated so that a wrong one cannot hide in the marts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from gpufinops.project import PROJECT_DIR
from transform import runner

PROFILE = """tiny:
  target: default
  outputs:
    default:
      type: duckdb
      path: "{path}"
      schema: main
      threads: 1
"""

PROJECT = """name: tiny
version: "1.0"
profile: tiny
config-version: 2
model-paths: [models]
macro-paths: [macros]
dispatch:
  - macro_namespace: dbt
    search_order: [tiny, dbt]
"""

# one row per key k; a run's rows come from the var `rows` ([[k, v], ...]); var `extra` adds a column
SQL_MODEL = """{{{{ config(materialized='incremental', unique_key=['k'], on_schema_change='{osc}') }}}}
select * from (values {{% for k, v in var('rows') %}}({{{{ k }}}}, {{{{ v }}}}{{{{ ', ' ~ var('extra') if var('extra', none) }}}}){{{{ ', ' if not loop.last }}}}{{% endfor %}})
  as t(k, v{{{{ ', extra' if var('extra', none) }}}})
"""

PY_MODEL = """import pandas as pd

def model(dbt, session):
    dbt.config(materialized="incremental", unique_key=["k"])
    rows = dbt.config.get("meta")["rows"]
    return pd.DataFrame({"k": [r[0] for r in rows], "v": [float(r[1]) for r in rows]})
"""


def _project(tmp_path: Path, models: dict[str, str]) -> Path:
    proj = tmp_path / "proj"
    (proj / "macros").mkdir(parents=True)
    (proj / "models").mkdir()
    for name in ("materializations.sql", "portable.sql"):  # the materialisation and the delete it runs
        shutil.copy(PROJECT_DIR / "macros" / name, proj / "macros" / name)
    (proj / "dbt_project.yml").write_text(PROJECT)
    (proj / "profiles.yml").write_text(PROFILE.format(path=tmp_path / "w.duckdb"))
    for name, text in models.items():
        (proj / "models" / name).write_text(text)
    return proj


def _build(proj: Path, variables: dict, *, select: str | None = None, full_refresh: bool = False):  # noqa: ANN202
    from dbt.cli.main import dbtRunner

    args = ["build", "--project-dir", str(proj), "--profiles-dir", str(proj), "--target-path", str(proj / "target"),
            "--log-path", str(proj / "logs"), "--vars", json.dumps(variables), "--quiet"]
    args += ["--select", select] if select else []
    args += ["--full-refresh"] if full_refresh else []
    try:
        return dbtRunner().invoke(args)
    finally:
        runner._release_duckdb()


def _rows(tmp_path: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def _columns(tmp_path: Path, table: str) -> list[str]:
    return [r[0] for r in _rows(tmp_path, f"select column_name from duckdb_columns() where table_name = '{table}' order by column_index")]


def test_replaces_the_keys_it_rebuilds_and_keeps_the_others(tmp_path: Path) -> None:
    proj = _project(tmp_path, {"m.sql": SQL_MODEL.format(osc="ignore")})
    assert _build(proj, {"rows": [[1, 10], [2, 20], [3, 30]]}).success
    assert _build(proj, {"rows": [[2, 21], [4, 40]]}).success  # key 2 rebuilt, key 4 new
    assert _rows(tmp_path, "select k, v from m order by k") == [(1, 10), (2, 21), (3, 30), (4, 40)]
    # nothing of the batch is left behind, in the file or as a table
    assert _rows(tmp_path, "select table_name from duckdb_tables() where table_name like '%gf_new%'") == []


def test_a_new_column_is_added_with_append_new_columns_and_left_out_with_ignore(tmp_path: Path) -> None:
    proj = _project(tmp_path, {"a.sql": SQL_MODEL.format(osc="append_new_columns"), "i.sql": SQL_MODEL.format(osc="ignore")})
    assert _build(proj, {"rows": [[1, 10], [2, 20]]}).success
    assert _build(proj, {"rows": [[2, 22]], "extra": 7}).success
    assert _columns(tmp_path, "a") == ["k", "v", "extra"]
    assert _rows(tmp_path, "select k, v, extra from a order by k") == [(1, 10, None), (2, 22, 7)]
    assert _columns(tmp_path, "i") == ["k", "v"]  # dbt's 'ignore': the target's columns only
    assert _rows(tmp_path, "select k, v from i order by k") == [(1, 10), (2, 22)]


def test_a_full_refresh_rebuilds_the_table_whole(tmp_path: Path) -> None:
    proj = _project(tmp_path, {"m.sql": SQL_MODEL.format(osc="ignore")})
    assert _build(proj, {"rows": [[1, 10], [2, 20]]}).success
    assert _build(proj, {"rows": [[3, 30]], "extra": 1}, full_refresh=True).success
    assert _rows(tmp_path, "select * from m") == [(3, 30, 1)]


def test_a_python_model_is_merged_the_same_way_and_its_batch_table_dropped(tmp_path: Path) -> None:
    proj = _project(tmp_path, {"p.py": PY_MODEL})
    yml = "version: 2\nmodels:\n  - name: p\n    config:\n      meta: {{rows: {rows}}}\n"
    (proj / "models" / "p.yml").write_text(yml.format(rows=[[1, 1], [2, 2]]))
    assert _build(proj, {}).success
    (proj / "models" / "p.yml").write_text(yml.format(rows=[[2, 5], [3, 3]]))
    assert _build(proj, {}).success
    assert _rows(tmp_path, "select k, v from p order by k") == [(1, 1.0), (2, 5.0), (3, 3.0)]
    assert [r[0] for r in _rows(tmp_path, "select table_name from duckdb_tables()")] == ["p"]


@pytest.mark.parametrize(("config", "named"), [("on_schema_change='fail'", "on_schema_change='fail'"),
                                               ("incremental_strategy='append'", "incremental_strategy='append'")])
def test_a_configuration_it_does_not_run_is_refused_by_name(tmp_path: Path, config: str, named: str) -> None:
    model = "{{ config(materialized='incremental', unique_key=['k'], " + config + ") }}\nselect 1 as k"
    proj = _project(tmp_path, {"bad.sql": model})
    res = _build(proj, {})
    assert not res.success
    messages = " ".join(str(r.message) for r in res.result.results)
    assert "bad" in messages and named in messages and "materializations.sql" in messages


TABLE_MODEL = """{{{{ config(materialized='{mat}') }}}}
select * from (values {{% for k, v in var('rows') %}}({{{{ k }}}}, {{{{ v }}}}){{{{ ', ' if not loop.last }}}}{{% endfor %}}) as t(k, v)
{{{{ "where cast('not a number' as integer) = k" if var('fail', false) }}}}
"""


def test_a_table_is_replaced_whole_and_a_failed_rebuild_keeps_the_old_one(tmp_path: Path) -> None:
    proj = _project(tmp_path, {"t.sql": TABLE_MODEL.format(mat="table")})
    assert _build(proj, {"rows": [[1, 10], [2, 20]]}).success
    assert _build(proj, {"rows": [[3, 30]]}).success
    assert _rows(tmp_path, "select k, v from t") == [(3, 30)]
    failed = _build(proj, {"rows": [[4, 40]], "fail": True})
    assert not failed.success
    # the drop of the old table and the failed create were one transaction: the old rows are still there
    assert _rows(tmp_path, "select k, v from t") == [(3, 30)]
    assert [r[0] for r in _rows(tmp_path, "select table_name from duckdb_tables()")] == ["t"]


def test_a_view_becomes_a_table_and_an_incremental_model_without_a_key_appends(tmp_path: Path) -> None:
    proj = _project(tmp_path, {"t.sql": TABLE_MODEL.format(mat="view")})
    assert _build(proj, {"rows": [[1, 10]]}).success
    (proj / "models" / "t.sql").write_text(TABLE_MODEL.format(mat="table"))
    assert _build(proj, {"rows": [[2, 20]]}).success
    assert _rows(tmp_path, "select table_type from information_schema.tables where table_name = 't'") == [("BASE TABLE",)]
    assert _rows(tmp_path, "select k, v from t") == [(2, 20)]
    (proj / "models" / "t.sql").write_text(TABLE_MODEL.format(mat="incremental"))
    assert _build(proj, {"rows": [[3, 30]]}).success  # an existing table, no unique key: rows appended
    assert _rows(tmp_path, "select k, v from t order by k") == [(2, 20), (3, 30)]
