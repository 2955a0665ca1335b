"""Support for the bad-input suite (tests/test_bad_input_*.py): a small home with every source
landed once, a snapshot of the lake and the app DB, and a CLI runner that keeps the traceback
out of the message.

Every case asserts the same three things: the exit (or HTTP) status; that the message names the
file, row, column, series or setting; and that :func:`snapshot` of the home is unchanged.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from typer.testing import CliRunner

from cli.main import app
from ingest.schema import TABLES

FIX = Path(__file__).parent / "fixtures"
DUMP = FIX / "k8s" / "dump-eks-gke-aks.json"
DCGM = FIX / "prometheus" / "dcgm_text_no_ts.prom"
FOCUS = FIX / "focus" / "gcp_focus_1.2.csv"
PRICES = FIX / "prices" / "aws_ec2_offer.csv"
AT = "2026-11-01T04:00:00Z"


@dataclass(frozen=True)
class HomeState:
    """What a bad run must not change: per landing table its files' hashes and row count, and
    the app DB's rows per table (hashed)."""

    lake: dict[str, dict[str, Any]]
    app_db: dict[str, str]

    def rows(self, table: str) -> int:
        return int(self.lake.get(table, {}).get("rows", 0))


def snapshot(home: Path) -> HomeState:
    lake: dict[str, dict[str, Any]] = {}
    root = home / "lake"
    for name in TABLES:
        files = sorted((root / name).glob("cluster=*/day=*/*.parquet")) if (root / name).is_dir() else []
        lake[name] = {
            "rows": sum(pq.ParquetFile(f).metadata.num_rows for f in files),
            "files": {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files},
        }
    db: dict[str, str] = {}
    path = home / "app.db"
    if path.exists():
        con = sqlite3.connect(path)
        try:
            for (table,) in con.execute("select name from sqlite_master where type = 'table' order by name"):
                rows = con.execute(f'select * from "{table}" order by 1').fetchall()
                db[table] = hashlib.sha256(repr(rows).encode()).hexdigest()
        finally:
            con.close()
    return HomeState(lake, db)


def cli(home: Path | None, *args: str, env: dict[str, str] | None = None) -> Any:
    """Run the CLI in-process; ``home`` None leaves --home out (for GPUFINOPS_HOME cases)."""
    argv = (["--home", str(home)] if home is not None else []) + [str(a) for a in args]
    return CliRunner().invoke(app, argv, env=env, catch_exceptions=True)


def build_base_home(home: Path) -> Path:
    """A home with one k8s snapshot, one DCGM scrape, AWS prices, a FOCUS bill and the app DB."""
    home.mkdir(parents=True, exist_ok=True)
    steps = [
        ("ingest", "k8s", "--cluster", "c1", "--from-dump", DUMP, "--at", AT),
        ("ingest", "dcgm", "--cluster", "c1", "--from-file", DCGM, "--at", AT),
        ("ingest", "prices", "--file", PRICES, "--format", "aws"),
        ("ingest", "billing", "--focus", FOCUS),
        ("db", "upgrade"),
    ]
    for step in steps:
        res = cli(home, *step)
        assert res.exit_code == 0, (step, res.output)
    return home


def copy_home(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest)
    return dest


def assert_refused(res: Any, before: HomeState, home: Path, *names: str, code: int = 2) -> str:
    """The three assertions of every case; returns the output."""
    out = res.output
    assert res.exit_code == code, out
    assert "Traceback" not in out, out
    lines = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert lines or code != 2 or "Usage:" in out, out  # one `error:` line (usage errors: click's own)
    flat = " ".join(out.split())
    for name in names:
        assert name in flat, f"{name!r} not in {flat!r}"
    assert snapshot(home) == before, "the bad run changed the lake or the app DB"
    return out


def dump_with(mutate: Any) -> dict[str, Any]:
    """The fixture dump, changed by ``mutate(doc)``."""
    doc = copy.deepcopy(json.loads(DUMP.read_text()))
    mutate(doc)
    return doc


def pods(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in doc["items"] if i.get("kind") == "Pod"]


def gpu_pod(doc: dict[str, Any]) -> dict[str, Any]:
    """The first pod whose first container requests nvidia.com/gpu."""
    for p in pods(doc):
        for c in p["spec"].get("containers", []):
            if "nvidia.com/gpu" in (c.get("resources", {}).get("requests") or {}):
                return p
    raise AssertionError("the fixture dump has no GPU pod")
