"""The one way every part opens the warehouse (read-only for readers)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from gpufinops.errors import ConfigError

__all__ = ["connect"]


def connect(path: Path | str, *, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    path = Path(path)
    if read_only and not path.exists():
        raise ConfigError(f"warehouse {path} does not exist yet; run `gpufinops build` first")
    return duckdb.connect(str(path), read_only=read_only)
