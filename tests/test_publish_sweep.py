"""What a killed build leaves in warehouse.d/ is swept by the next one, DuckDB's spill folder included."""

from __future__ import annotations

from pathlib import Path

import duckdb

from gpufinops.warehouse import live_file, versions_dir
from transform.publish import prepare, publish


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
