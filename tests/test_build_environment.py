"""The DuckDB settings a build's dbt invocations run with reach DuckDB itself (profiles.yml reads them
from the environment transform.runner.dbt_environment gives dbt): the memory limit, and the block
allocator memory, which a full build sets and an incremental one leaves at DuckDB's default."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from gpufinops.settings import Settings
from transform import runner


def _duckdb_settings(settings: Settings, home: Path, *, full_refresh: bool) -> dict[str, str]:
    """What DuckDB reports for the two settings inside a dbt invocation of a build of ``home``."""
    from dbt.cli.main import dbtRunner

    work = home / "dbt"
    work.mkdir(parents=True, exist_ok=True)
    env = runner.dbt_environment(settings, work, home / "probe.duckdb", full_refresh=full_refresh)
    with runner._environment(env):
        res = dbtRunner().invoke([
            "show", *runner.dbt_common_args(work, runner.dbt_vars(settings)), "--quiet", "--output", "json",
            "--inline", "select current_setting('block_allocator_memory') as b, current_setting('memory_limit') as m"])
    assert res.success, res.exception
    b, m = res.result.results[0].agate_table.rows[0]
    return {"block_allocator_memory": b, "memory_limit": m}


def _as_duckdb_prints(**config: str) -> dict[str, str]:
    """The same settings as DuckDB prints them when given ``config`` directly."""
    with duckdb.connect(config=config) as con:
        return {k: con.execute(f"select current_setting('{k}')").fetchone()[0] for k in config}


@pytest.fixture()
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("GPUFINOPS_DUCKDB_MEMORY_LIMIT", raising=False)
    monkeypatch.delenv("GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY", raising=False)
    return Settings(home=str(tmp_path), build_memory_limit="3GB", build_block_allocator_memory="2GB",
                    hourly_memory_limit="1GB", hourly_block_allocator_memory="0B")


def test_a_full_build_keeps_buffers_in_the_block_allocator_and_an_hour_does_not(settings: Settings, tmp_path: Path) -> None:
    full = _duckdb_settings(settings, tmp_path, full_refresh=True)
    assert full == _as_duckdb_prints(block_allocator_memory="2GB", memory_limit="3GB")
    hourly = _duckdb_settings(settings, tmp_path, full_refresh=False)
    assert hourly == _as_duckdb_prints(block_allocator_memory="0B", memory_limit="1GB")
    assert hourly["block_allocator_memory"] != full["block_allocator_memory"]


def test_the_environment_overrides_the_settings(settings: Settings, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY", "512MB")
    env = runner.dbt_environment(settings, tmp_path, tmp_path / "w.duckdb", full_refresh=True)
    assert env["GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY"] == "512MB"
    assert env["GPUFINOPS_DUCKDB_MEMORY_LIMIT"] == "3GB"
