"""A dbt-duckdb plugin (profiles.yml ``plugins``): the DuckDB settings that differ between a full build
and an hourly one, read from the environment when dbt opens the warehouse, not when it parses.

dbt hashes the profile's rendered settings into its saved parse and parses the whole project again
(~4 s here) when they change. With the memory limit and block allocator memory rendered into the
profile, every switch between an hourly build and a full build in a fresh process re-parsed. Here
the profile stays the same for both kinds; ``transform.runner.dbt_environment`` still chooses the
values, and DuckDB still runs with them (tests/test_build_environment.py reads them back)."""

from __future__ import annotations

import os

from dbt.adapters.duckdb.plugins import BasePlugin

# DuckDB setting -> (environment variable, default when it is unset)
SETTINGS: dict[str, tuple[str, str]] = {
    "threads": ("GPUFINOPS_DUCKDB_THREADS", "2"),
    "memory_limit": ("GPUFINOPS_DUCKDB_MEMORY_LIMIT", "6GB"),
    # buffers the block allocator keeps once touched (Settings.build_block_allocator_memory)
    "block_allocator_memory": ("GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY", "0B"),
}
# settings DuckDB lets a connection change at any time; block_allocator_memory can only grow, so it is
# set once, when dbt opens the warehouse (transform.runner closes it after every dbt invocation)
PER_CURSOR = ("threads", "memory_limit")


def build_settings() -> dict[str, str]:
    """The settings a dbt connection opened now gets."""
    return {name: os.environ.get(var) or default for name, (var, default) in SETTINGS.items()}


def _set(conn, names) -> None:  # noqa: ANN001 (a duckdb connection or cursor)
    values = build_settings()
    for name in names:
        quoted = values[name].replace("'", "''")
        conn.execute(f"SET {name} = '{quoted}'")


class Plugin(BasePlugin):
    def configure_connection(self, conn) -> None:  # noqa: ANN001
        _set(conn, SETTINGS)

    def configure_cursor(self, cursor) -> None:  # noqa: ANN001
        _set(cursor, PER_CURSOR)
