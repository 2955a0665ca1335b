"""Per-(cluster, source) watermark: the end of the newest committed window, kept in the lake.

Stored as ``<lake>/_watermarks/<cluster>__<source>.json`` and written (atomically) only after a
window's lake run has committed, so a crash never moves it past data that is not there.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from gpufinops.errors import InputError

__all__ = ["watermark_path", "read_watermark", "write_watermark"]

_SAFE = re.compile(r"[^A-Za-z0-9.-]+")


def watermark_path(lake_root: Path | str, cluster: str, source: str) -> Path:
    name = f"{_SAFE.sub('-', cluster)}__{_SAFE.sub('-', source)}.json"
    return Path(lake_root) / "_watermarks" / name


def read_watermark(lake_root: Path | str, cluster: str, source: str) -> datetime | None:
    path = watermark_path(lake_root, cluster, source)
    if not path.exists():
        return None
    try:
        return datetime.fromisoformat(json.loads(path.read_text())["watermark"]).astimezone(UTC)
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"watermark file {path} is unreadable ({exc}); delete it and pass --start") from exc


def write_watermark(lake_root: Path | str, cluster: str, source: str, ts: datetime, run_id: str) -> None:
    """Advance the watermark to ``ts``; never moves it backwards (re-ingesting old windows)."""
    current = read_watermark(lake_root, cluster, source)
    if current is not None and current >= ts:
        return
    path = watermark_path(lake_root, cluster, source)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    body = {"cluster": cluster, "source": source, "watermark": ts.astimezone(UTC).isoformat(),
            "run_id": run_id, "updated_at": datetime.now(UTC).isoformat()}
    tmp.write_text(json.dumps(body, sort_keys=True))
    os.replace(tmp, path)
