"""Shared fixtures: one dbt-built fixture warehouse for the whole session.

`fleet` is the demo generator at a tiny size (2 clusters, 12 nodes, 1 day), its FOCUS bill, a full
`gpufinops build --full` and an incremental `gpufinops build`, all through the real CLI: every face
and recommender test reads marts that dbt built, never hand-written tables. Treat it as read-only;
a test that writes copies the home first (`fleet_copy`).

`mini_fleet` is the faces' mini world (tests/fixtures/faces/mini_lake.py: teams alpha and beta on
cluster c1, two days, every number worked out by hand in its docstring) through `dbt build`: the API,
dashboard and report tests copy it into their homes (tests/fixtures/dashboards/support.py). No test
writes mart tables by hand.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufinops.settings import Settings

FLEET_ARGS = ["--days", "1", "--nodes", "12", "--clusters", "2", "--seed", "42", "--start", "2026-11-01"]


@dataclass(frozen=True)
class Fleet:
    home: Path
    settings: Settings

    @property
    def warehouse(self) -> Path:
        return Path(self.settings.warehouse_path)


def _cli(home: Path, *args: str) -> str:
    from cli.main import app

    res = CliRunner().invoke(app, ["--home", str(home), *args], catch_exceptions=False)
    assert res.exit_code == 0, f"gpufinops {' '.join(args)} failed ({res.exit_code}):\n{res.output}"
    return res.output


def build_fleet_home(home: Path) -> Fleet:
    home.mkdir(parents=True, exist_ok=True)
    _cli(home, "demo", *FLEET_ARGS)
    _cli(home, "build", "--full")
    _cli(home, "ingest", "billing", "--demo-bill", str(home / "demo-focus-bill.csv"))
    _cli(home, "build")
    return Fleet(home=home, settings=Settings(home=home))


@pytest.fixture(scope="session")
def fleet(tmp_path_factory) -> Fleet:
    """The session's dbt-built fixture warehouse (read-only)."""
    return build_fleet_home(tmp_path_factory.mktemp("fleet"))


def _small_lake_module():
    import importlib.util

    path = Path(__file__).parent / "fixtures" / "warehouse" / "small_lake.py"
    spec = importlib.util.spec_from_file_location("conftest_small_lake", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def small_fleet(tmp_path_factory) -> Fleet:
    """The hand-made lake of tests/fixtures/warehouse/small_lake.py over 3 hours (the third is
    unmeasured: no DCGM samples), built with `gpufinops build --full`; for tests that need numbers
    worked out by hand (read-only)."""
    home = tmp_path_factory.mktemp("small_fleet")
    settings = Settings(home=home)
    _small_lake_module().write_small_lake(settings.lake_dir, hours=3)
    _cli(home, "build", "--full")
    return Fleet(home=home, settings=settings)


def _fixture_module(*parts: str):
    path = Path(__file__).parent.joinpath("fixtures", *parts)
    spec = importlib.util.spec_from_file_location("conftest_" + path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def mini_fleet(tmp_path_factory) -> Fleet:
    """The faces' mini world (tests/fixtures/faces/mini_lake.py: teams alpha/beta, cluster c1, two
    days, numbers worked out by hand in its docstring) through `dbt build` (`transform.run_build`),
    for the API, dashboard and report tests. Read-only: tests copy it into their own home
    (tests/fixtures/dashboards/support.py `build_warehouse`)."""
    from transform import run_build

    home = tmp_path_factory.mktemp("mini_fleet")
    settings = Settings(home=home)
    _fixture_module("faces", "mini_lake.py").write_mini_lake(settings.lake_dir)
    run_build(settings, full_refresh=True)
    return Fleet(home=home, settings=settings)


@pytest.fixture
def fleet_copy(fleet: Fleet, tmp_path: Path) -> Fleet:
    """A private copy of the fixture home, for tests that write (app DB, a rebuild)."""
    home = tmp_path / "fleet"
    # symlinks=True: the live warehouse is a relative link into warehouse.d, which stays valid in the copy
    shutil.copytree(fleet.home, home, symlinks=True, ignore=shutil.ignore_patterns("*.wal", "logs", "*.lock"))
    return Fleet(home=home, settings=Settings(home=home))


def small_lake_module():
    """tests/fixtures/warehouse/small_lake.py (hand-made lake with hand-computed numbers)."""
    path = Path(__file__).parent / "fixtures" / "warehouse" / "small_lake.py"
    spec = importlib.util.spec_from_file_location("warehouse_small_lake", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def small_lake_build(tmp_path_factory):
    """The small hand-made lake through a full `dbt build` with the unit tests: (settings, result,
    snapshot of the allocation / node marts). Read-only; shared by the warehouse and recommender tests."""
    import duckdb

    from transform import run_build

    home = tmp_path_factory.mktemp("wh")
    # the fixture's hand computations are under the weights split (small_lake's docstring); the
    # residual method has its own hand computations (unit test node_rate_split_residual)
    config = home / "gpufinops.yaml"
    config.write_text("cost:\n  split_method: weights\n")
    settings = Settings(home=home, config=config)
    small_lake_module().write_small_lake(settings.lake_dir)
    result = run_build(settings, full_refresh=True, unit_tests=True)
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    snapshot = {
        "alloc": con.sql("select * from fct_gpu_allocation_hourly order by hour, pod").fetchall(),
        "nodes": con.sql("select * from fct_node_hourly order by hour, node").fetchall(),
    }
    con.close()
    return settings, result, snapshot


@pytest.fixture(scope="session")
def bad_input_base(tmp_path_factory) -> Path:
    """A small home with every file source landed once and the app DB (the bad-input suite's start)."""
    from badinput import build_base_home

    return build_base_home(tmp_path_factory.mktemp("bad-input") / "home")


@pytest.fixture
def bad_home(bad_input_base: Path, tmp_path: Path) -> Path:
    """A private copy of :func:`bad_input_base` for one case."""
    return shutil.copytree(bad_input_base, tmp_path / "home")
