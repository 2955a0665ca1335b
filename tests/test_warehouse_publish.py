"""Atomic publish: a build writes a new version beside the live one and renames a link over it.

On the `fleet` fixture (copied): a second build started during one is refused naming the first; a
build killed with SIGKILL mid-way leaves the live warehouse as it was and the next build succeeds; a
failed build keeps `dbt/seeds.json` (the next build stays incremental), and `recommend` and `report`
refuse to run on a warehouse whose last build failed, naming the failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from gpufinops.settings import Settings
from gpufinops.warehouse import last_build, live_file, lock_path, published_version, versions_dir

pytestmark = pytest.mark.timeout(600)


def _digest(link: Path) -> str:
    """A content hash of the marts the faces read (and the file the link resolves to)."""
    con = duckdb.connect(str(live_file(link)), read_only=True)
    try:
        h = hashlib.sha256(str(live_file(link)).encode())
        for table in ("fct_showback_daily", "fct_workload_daily", "dim_workload"):
            rows = con.execute(f"select * from {table} order by all").fetchall()
            h.update(repr(rows).encode())
        return h.hexdigest()
    finally:
        con.close()


def _gpufinops(home: Path, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([str(Path(sys.executable).parent / "gpufinops"), "--home", str(home), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _cli(home: Path, *args: str):
    from cli.main import app

    return CliRunner().invoke(app, ["--home", str(home), *args])


def test_a_second_build_is_refused_and_a_killed_build_leaves_the_live_warehouse(fleet_copy) -> None:
    home, link = fleet_copy.home, Path(fleet_copy.settings.warehouse_path)
    before_version, before = published_version(link), _digest(link)
    seeds = (home / "dbt" / "seeds.json").read_text()
    first = _gpufinops(home, "build", "--full", "--no-summary")
    try:
        # the first build holds the lock and has started writing its own version file
        _wait_for(lambda: lock_path(link).is_file() and lock_path(link).stat().st_size > 0, 120, "the build lock")
        second = _gpufinops(home, "build", "--no-summary")
        out, _ = second.communicate(timeout=120)
        assert second.returncode == 2, out
        assert "another build is running" in out and f"pid {first.pid}" in " ".join(out.split()), out
        assert last_build(link)["pid"] == first.pid  # the refused build did not touch the record

        def writing() -> bool:
            files = [f for f in versions_dir(link).glob("*.duckdb") if f != live_file(link)]
            return bool(files) and files[0].stat().st_size > 1 << 20

        _wait_for(writing, 240, "the new version file to grow")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    assert published_version(link) == before_version and _digest(link) == before
    assert last_build(link)["status"] == "interrupted"
    assert (home / "dbt" / "seeds.json").read_text() == seeds
    # the next build sweeps the dead build's file, publishes, and stays incremental
    res = _cli(home, "build", "--no-summary")
    assert res.exit_code == 0, res.output
    assert "incremental" in res.output and "full rebuild" not in res.output
    assert published_version(link) != before_version and last_build(link)["status"] == "success"
    assert sorted(f.name for f in versions_dir(link).iterdir()) == [live_file(link).name]


def test_a_failed_build_keeps_the_seed_record_and_recommend_and_report_refuse(fleet_copy) -> None:
    from transform import BuildFailed, run_build

    home, link = fleet_copy.home, Path(fleet_copy.settings.warehouse_path)
    before_version, before = published_version(link), _digest(link)
    seeds = (home / "dbt" / "seeds.json").read_text()
    # an impossible tolerance: the money-conservation data tests fail
    with pytest.raises(BuildFailed) as err:
        run_build(Settings(home=home), extra_vars={"conservation_abs_tol": -1.0, "conservation_rel_tol": -1.0})
    assert "live warehouse is unchanged" in str(err.value)
    assert published_version(link) == before_version and _digest(link) == before
    assert (home / "dbt" / "seeds.json").read_text() == seeds
    record = last_build(link)
    assert record["status"] == "failed" and record["served_version"] == before_version
    failed = record["failed"]
    assert failed and all(": fail" in f or ": error" in f for f in failed)
    for args in (["recommend", "--dry-run"], ["report", "--period", "weekly", "--audience", "finance"]):
        res = _cli(home, *args)
        assert res.exit_code == 2, res.output
        text = " ".join(res.output.split())
        assert "failed" in text and failed[0].split(":")[0] in text and before_version in text, text
        assert "rerun `gpufinops build`" in text
    # the next build is incremental (the seed record survived) and clears the refusal
    res = _cli(home, "build", "--no-summary")
    assert res.exit_code == 0, res.output
    assert "incremental" in res.output and "full rebuild" not in res.output
    assert last_build(link)["status"] == "success"
    assert json.loads((home / "dbt" / "seeds.json").read_text())["version"] == published_version(link)
    res = _cli(home, "report", "--period", "weekly", "--audience", "finance")
    assert res.exit_code == 0, res.output


def test_a_home_from_before_atomic_publish_keeps_working(fleet_copy) -> None:
    """A plain warehouse.duckdb (and the old seeds.json format) becomes the first published version."""
    home, link = fleet_copy.home, Path(fleet_copy.settings.warehouse_path)
    target = live_file(link)
    os.unlink(link)
    os.replace(target, link)
    os.rmdir(versions_dir(link))
    (home / "dbt" / "seeds.json").write_text(json.dumps(
        {"warehouse": str(link), "digest": json.loads((home / "dbt" / "seeds.json").read_text())["digest"]}))
    assert published_version(link) == "legacy"
    before = duckdb.connect(str(link), read_only=True).execute(
        "select sum(chargeback_usd) from fct_showback_daily").fetchone()
    res = _cli(home, "build", "--no-summary")
    assert res.exit_code == 0, res.output
    assert "full rebuild" not in res.output
    assert link.is_symlink() and published_version(link) not in (None, "legacy")
    con = duckdb.connect(str(link), read_only=True)
    assert con.execute("select sum(chargeback_usd) from fct_showback_daily").fetchone() == pytest.approx(before)
    con.close()
