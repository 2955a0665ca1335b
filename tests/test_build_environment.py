"""The DuckDB settings a build's dbt invocations run with reach DuckDB itself (profiles.yml reads them
from the environment transform.runner.dbt_environment gives dbt): the memory limit, and the block
allocator memory, which a full build sets and an incremental one leaves at DuckDB's default. Through the
same dbt invocation, the key test macro (``unique_combination``) on rows with repeated keys."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from gpufinops.settings import Settings
from transform import runner


def _invoke(settings: Settings, home: Path, args: list[str], *, full_refresh: bool):  # noqa: ANN202 (dbtRunnerResult)
    """dbt ``args`` (a command and its options) run the way a build of ``home`` runs dbt."""
    from dbt.cli.main import dbtRunner

    work = home / "dbt"
    work.mkdir(parents=True, exist_ok=True)
    env = runner.dbt_environment(settings, work, home / "probe.duckdb", full_refresh=full_refresh)
    with runner._environment(env):
        try:
            res = dbtRunner().invoke([args[0], *runner.dbt_common_args(work, runner.dbt_vars(settings)), *args[1:]])
        finally:
            runner._release_duckdb()  # as a build does after each dbt invocation
    assert res.success, res.exception
    return res


def _dbt_show(settings: Settings, home: Path, inline: str, *, full_refresh: bool) -> list[tuple]:
    """The rows of ``dbt show --inline`` run the way a build of ``home`` runs dbt."""
    res = _invoke(settings, home, ["show", "--quiet", "--output", "json", "--limit", "-1", "--inline", inline],
                  full_refresh=full_refresh)
    return [tuple(r) for r in res.result.results[0].agate_table.rows]


def _duckdb_settings(settings: Settings, home: Path, *, full_refresh: bool) -> dict[str, str]:
    """What DuckDB reports for the settings inside a dbt invocation of a build of ``home``."""
    [(b, m, t)] = _dbt_show(settings, home, "select current_setting('block_allocator_memory') as b, "
                            "current_setting('memory_limit') as m, current_setting('threads') as t",
                            full_refresh=full_refresh)
    return {"block_allocator_memory": b, "memory_limit": m, "threads": int(t)}


def _as_duckdb_prints(**config: str) -> dict[str, str]:
    """The same settings as DuckDB prints them when given ``config`` directly."""
    with duckdb.connect(config=config) as con:
        return {k: con.execute(f"select current_setting('{k}')").fetchone()[0] for k in config}


@pytest.fixture()
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("GPUFINOPS_DUCKDB_MEMORY_LIMIT", raising=False)
    monkeypatch.delenv("GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY", raising=False)
    monkeypatch.delenv("GPUFINOPS_DUCKDB_THREADS", raising=False)
    return Settings(home=str(tmp_path), build_memory_limit="3GB", build_block_allocator_memory="2GB",
                    hourly_memory_limit="1GB", hourly_block_allocator_memory="0B",
                    build_duckdb_threads=3, hourly_duckdb_threads=2)


def test_a_full_build_keeps_buffers_in_the_block_allocator_and_an_hour_does_not(settings: Settings, tmp_path: Path) -> None:
    full = _duckdb_settings(settings, tmp_path, full_refresh=True)
    assert full == _as_duckdb_prints(block_allocator_memory="2GB", memory_limit="3GB") | {"threads": 3}
    hourly = _duckdb_settings(settings, tmp_path, full_refresh=False)
    assert hourly == _as_duckdb_prints(block_allocator_memory="0B", memory_limit="1GB") | {"threads": 2}
    assert hourly["block_allocator_memory"] != full["block_allocator_memory"]


def test_a_full_build_shares_the_cores_among_dbt_threads_unless_told(settings: Settings,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset, a full build's DuckDB threads are the cores over dbt's threads (at least one); the
    hour keeps its own; GPUFINOPS_DUCKDB_THREADS overrides both."""
    monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    auto = settings.model_copy(update={"build_duckdb_threads": None, "full_build_threads": 2})
    assert runner.duckdb_threads(auto, whole=True) == 4
    assert runner.duckdb_threads(auto.model_copy(update={"full_build_threads": 16}), whole=True) == 1
    assert runner.duckdb_threads(auto, whole=False) == 2
    env = runner.dbt_environment(auto, Path("w"), Path("w.duckdb"), full_refresh=True)
    assert env["GPUFINOPS_DUCKDB_THREADS"] == "4"
    monkeypatch.setenv("GPUFINOPS_DUCKDB_THREADS", "5")
    assert runner.dbt_environment(auto, Path("w"), Path("w.duckdb"), full_refresh=False)["GPUFINOPS_DUCKDB_THREADS"] == "5"


def test_the_environment_overrides_the_settings(settings: Settings, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY", "512MB")
    env = runner.dbt_environment(settings, tmp_path, tmp_path / "w.duckdb", full_refresh=True)
    assert env["GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY"] == "512MB"
    assert env["GPUFINOPS_DUCKDB_MEMORY_LIMIT"] == "3GB"


def test_unique_combination_finds_every_repeated_key_and_only_those(settings: Settings, tmp_path: Path) -> None:
    """The generic test behind every model's key (macros/generic_tests.sql), run by dbt on DuckDB: it
    pre-groups by a hash of the key, and must still return exactly the repeated keys, nulls included."""
    rows = ("(1, 'a', 'x'), (1, 'a', 'x'), (1, 'a', 'y'), (2, null, 'x'), (2, null, 'x'), (2, null, 'x'),"
            " (3, 'b', null), (3, 'c', null), (null, null, null), (null, null, null)")
    model = f"(select * from (values {rows}) as t(k, s, v))"
    got = _dbt_show(settings, tmp_path, "select * from ({{ gpufinops.test_unique_combination(model=\"" + model
                    + "\", columns=['k', 's']) }}) as failing order by k nulls last", full_refresh=True)
    assert got == [(1, "a", 3), (2, None, 3), (None, None, 2)]


def _parsed_profile_hash(settings: Settings, home: Path, *, full_refresh: bool) -> str:
    """The profile hash dbt saves with its parse of the project for a build of ``home``: a parse whose
    hash differs from the saved one is a full parse again."""
    res = _invoke(settings, home, ["parse", "--quiet", "--no-write-json"], full_refresh=full_refresh)
    return res.result.state_check.profile_hash.checksum


def test_a_full_build_and_an_hour_share_the_parse(settings: Settings, tmp_path: Path) -> None:
    """The two kinds of build set different DuckDB settings (above) through the same profile, so that
    switching from one to the other in a fresh process reuses dbt's saved parse."""
    full = _parsed_profile_hash(settings, tmp_path, full_refresh=True)
    hourly = _parsed_profile_hash(settings, tmp_path, full_refresh=False)
    assert full == hourly
    log = (tmp_path / "dbt" / "logs" / "dbt.log").read_text()
    assert "profile has changed" not in log
