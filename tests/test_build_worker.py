"""The long-lived build worker (``gpufinops serve builder``, transform/worker.py).

A real worker process serves a home built in full; ``gpufinops build`` (a real CLI process) hands it
two incremental builds. The worker parses the project once per set of vars (a new cluster in the lake
changes var lake_clusters, so the first hand-off parses again; the second reuses the parse), and what
it publishes equals a fresh full build of the same lake, table by table, row by row.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from gpufinops.errors import ConfigError
from gpufinops.settings import Settings
from gpufinops.warehouse import live_file
from testsupport.warehouse_compare import assert_same_tables
from transform.publish import spare_path
from transform.worker import SOCKET_NAME, WorkerUnavailable, remote_build, worker_alive

_FIXTURE = Path(__file__).parent / "fixtures" / "warehouse" / "small_lake.py"
_spec = importlib.util.spec_from_file_location("warehouse_small_lake_worker", _FIXTURE)
lake = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(lake)

pytestmark = pytest.mark.timeout(600)
_ROOT = Path(__file__).resolve().parents[1]


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", "--home", str(home), *args], cwd=_ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def worked(tmp_path_factory):
    from transform import run_build

    home = Settings(home=tmp_path_factory.mktemp("worker"))
    lake.write_small_lake(home.lake_dir, start=lake.T0, hours=12)
    run_build(home, full_refresh=True)
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "--home", str(home.home), "serve", "builder"],
                            cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while (ping := worker_alive(home.home)) is None:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the build worker did not come up"
            time.sleep(0.5)
        pings = [ping]
        # hours 12-14, and a cluster new to the lake (var lake_clusters changes: the project is parsed again)
        lake.write_small_lake(home.lake_dir, start=lake.T0 + timedelta(hours=12), hours=2)
        lake.write_small_lake(home.lake_dir, start=lake.T0 - timedelta(days=1), hours=1, cluster="c2")
        first = _cli(Path(home.home), "build")
        pings.append(worker_alive(home.home))
        lake.write_small_lake(home.lake_dir, start=lake.T0 + timedelta(hours=14), hours=2)
        second = _cli(Path(home.home), "build", "--no-summary")
        pings.append(worker_alive(home.home))
        spare = spare_path(live_file(home.warehouse_path))
        deadline = time.monotonic() + 60
        while not spare.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        full = Settings(home=tmp_path_factory.mktemp("worker-full"))
        shutil.copytree(home.lake_dir, full.lake_dir)
        run_build(full, full_refresh=True)
        yield home, full, first, second, pings, proc, spare
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_cli_hands_the_build_to_the_worker(worked):
    home, _, first, second, pings, *_ = worked
    for run in (first, second):
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"in the build worker, pid {pings[0]['pid']}" in " ".join(run.stdout.split()), run.stdout
    assert "Showback" in first.stdout and "Showback" not in second.stdout  # --no-summary still honoured
    assert [p["builds"] for p in pings] == [0, 1, 2]


def test_the_worker_parses_again_only_when_the_vars_change(worked):
    _, _, _, _, pings, *_ = worked
    # one parse at start; the new cluster changed lake_clusters (one more); the next hour reused it
    assert [p["parses"] for p in pings] == [1, 2, 2]


def test_the_parsed_project_is_frozen_once(worked):
    _, _, _, _, pings, *_ = worked
    # the parse's objects are out of the collector's sight (each dbt invocation ends with a full
    # collection); a second parse unfreezes the first's, so the frozen set does not grow per parse
    assert pings[0]["frozen"] > 100_000
    assert pings[1]["frozen"] < 1.5 * pings[0]["frozen"]


def test_the_worker_keeps_a_spare_copy_of_the_live_version(worked):
    home, *_, spare = worked
    # made in the background after the build: the next build renames it instead of copying
    assert spare.exists() and spare.read_bytes() == live_file(home.warehouse_path).read_bytes()


def test_what_the_worker_published_equals_a_full_build(worked):
    home, full, *_ = worked
    assert_same_tables(home.warehouse_path, full.warehouse_path,
                       {"fct_gpu_allocation_hourly", "fct_showback_daily", "fct_cluster_capacity_hourly"})


def test_a_worker_refuses_another_home(worked, tmp_path):
    home, *_ = worked
    other = tmp_path / "other"
    other.mkdir()
    os.symlink(Path(home.home) / SOCKET_NAME, other / SOCKET_NAME)  # the other home's socket leads to this worker
    with pytest.raises(ConfigError, match="serves home"):
        remote_build(other, full=False)


def test_without_a_worker_the_build_runs_in_process(tmp_path):
    (tmp_path / SOCKET_NAME).touch()  # a stale socket file of a worker that is gone
    with pytest.raises(WorkerUnavailable):
        remote_build(tmp_path)
    assert worker_alive(tmp_path) is None
    run = _cli(tmp_path, "build", "--no-summary")  # falls back to an in-process build: its own error
    assert run.returncode == 2 and "does not exist" in run.stdout + run.stderr, run.stdout + run.stderr
