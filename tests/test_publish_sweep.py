"""What a killed build leaves in warehouse.d/ is swept by the next one, DuckDB's spill folder included."""

from __future__ import annotations

from pathlib import Path

import duckdb

from gpufinops.warehouse import live_file, versions_dir
from transform.publish import make_spare, prepare, publish


def test_a_killed_builds_files_and_spill_folder_are_swept(tmp_path: Path) -> None:
    link = tmp_path / "warehouse.duckdb"
    first, _ = prepare(link, "v1", copy=False)
    duckdb.connect(str(first)).execute("create table t as select 42 as x").close()
    publish(link, first)
    # a build killed while DuckDB spilled: its version file, WAL and <file>.tmp spill folder stay
    folder = versions_dir(link)
    (folder / "v2.duckdb").write_bytes(b"half")
    (folder / "v2.duckdb.wal").write_bytes(b"")
    spill = folder / "v2.duckdb.tmp"
    (spill / "duckdb_temp_storage-0.tmp").parent.mkdir(parents=True)
    (spill / "duckdb_temp_storage-0.tmp").write_bytes(b"x" * 1024)
    new, took = prepare(link, "v3", copy=True)
    assert took >= 0 and new.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["v1.duckdb", "v3.duckdb"]
    publish(link, new)
    assert live_file(link).name == "v3.duckdb"
    assert duckdb.connect(str(link), read_only=True).execute("select x from t").fetchall() == [(42,)]


def _published(link: Path, version: str, value: int) -> Path:
    new, _ = prepare(link, version, copy=link.exists())
    con = duckdb.connect(str(new))
    con.execute("create or replace table t as select ? as x", [value])
    con.close()
    return publish(link, new)


def test_the_next_build_takes_the_spare_copy_of_the_live_version(tmp_path: Path) -> None:
    link = tmp_path / "warehouse.duckdb"
    live = _published(link, "v1", 1)
    spare = make_spare(link)
    assert spare is not None and spare.name == ".spare.v1.duckdb"
    assert spare.read_bytes() == live.read_bytes()
    assert make_spare(link) == spare  # one spare per version
    new, took = prepare(link, "v2", copy=True)
    # the spare was renamed, not copied: the live version is still there, the spare is gone
    assert took == 0.0 and not spare.exists() and live.exists()
    assert duckdb.connect(str(new), read_only=True).execute("select x from t").fetchall() == [(1,)]


def test_a_spare_of_an_older_version_is_never_taken(tmp_path: Path) -> None:
    link = tmp_path / "warehouse.duckdb"
    _published(link, "v1", 1)
    stale = make_spare(link)
    assert stale is not None
    _published(link, "v2", 2)  # published after the spare was made: the spare holds v1
    folder = versions_dir(link)
    (folder / ".spare.v2.duckdb.123.partial").write_bytes(b"half")  # a copy a killed worker left
    new, took = prepare(link, "v3", copy=True)
    assert took > 0.0  # copied from the live file
    assert duckdb.connect(str(new), read_only=True).execute("select x from t").fetchall() == [(2,)]
    assert sorted(p.name for p in folder.iterdir()) == ["v2.duckdb", "v3.duckdb"]


def test_a_new_spare_removes_the_finished_spare_of_an_older_version(tmp_path: Path) -> None:
    link = tmp_path / "warehouse.duckdb"
    _published(link, "v1", 1)
    old = make_spare(link)
    new, _ = prepare(link, "v2", copy=False)  # a full build: it takes no spare
    duckdb.connect(str(new)).execute("create table t as select 2 as x").close()
    publish(link, new)
    assert old is not None and old.exists()
    spare = make_spare(link)
    assert spare is not None and spare.name == ".spare.v2.duckdb" and not old.exists()


def test_a_new_spare_removes_the_half_copy_a_killed_worker_left_but_not_a_running_ones(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    link = tmp_path / "warehouse.duckdb"
    _published(link, "v1", 1)
    folder = versions_dir(link)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()  # a pid that has exited
    (folder / f".spare.v1.duckdb.{dead}.partial").write_bytes(b"half")  # a worker killed mid-copy
    running = folder / f".spare.v1.duckdb.{os.getppid()}.partial"  # a process that still runs: leave it
    running.write_bytes(b"copying")
    spare = make_spare(link)
    assert spare is not None and spare.name == ".spare.v1.duckdb"
    assert sorted(p.name for p in folder.iterdir()) == sorted([".spare.v1.duckdb", running.name, "v1.duckdb"])


def test_a_deferred_removal_sets_the_old_version_aside_at_once_and_unlinks_it_after(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    # the build worker's publish: the superseded version is renamed aside and unlinked in the background;
    # a reader holding it keeps reading, and set-aside files a process left behind go with the next sweep
    import threading

    import transform.publish as pub
    from transform.publish import TRASH, defer_removal, wait_for_removals

    unlinked_on: list[tuple[str, list[str]]] = []
    real = pub._unlink_all

    def recording(files: list[Path]) -> None:
        unlinked_on.append((threading.current_thread().name, [f.name for f in files]))
        real(files)

    monkeypatch.setattr(pub, "_unlink_all", recording)
    link = tmp_path / "warehouse.duckdb"
    folder = versions_dir(link)
    v1 = _published(link, "v1", 1)
    reader = duckdb.connect(str(v1), read_only=True)
    defer_removal(True)
    try:
        _published(link, "v2", 2)
        names = {p.name for p in folder.iterdir()}
        assert "v1.duckdb" not in names and "v2.duckdb" in names  # set aside (or already gone) before publish returns
        assert reader.execute("select x from t").fetchall() == [(1,)]
        wait_for_removals(30)
        assert unlinked_on[-1] == ("version-removal", [f"{TRASH}v1.duckdb"])  # in the background thread
        assert sorted(p.name for p in folder.iterdir()) == ["v2.duckdb"]
        (folder / f"{TRASH}v0.duckdb").write_bytes(b"left by a worker that exited first")
    finally:
        defer_removal(False)
        reader.close()
    _published(link, "v3", 3)  # a plain (not deferred) publish sweeps the left-over too
    assert sorted(p.name for p in folder.iterdir()) == ["v3.duckdb"]
    assert duckdb.connect(str(link), read_only=True).execute("select x from t").fetchall() == [(3,)]
