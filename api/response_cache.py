"""Pre-serialised responses of the read endpoints, valid for one warehouse version.

A hot read endpoint (``GET /v1/workloads/{id}/cost``, ``GET /v1/showback``) answers the same bytes for
every caller that may see them until a build publishes. So its JSON body is built and serialised once
per (request key, warehouse stamp) and kept here; the route checks the caller's scope and sends the
bytes. An entry is valid only while:

* the warehouse stamp is the one it was computed on (``gpufinops.warehouse.Reader.stamp``: the
  resolved version file, its inode, mtime and size, and its WAL): a publish invalidates every entry,
  and the first request after it computes on the new version, inside one snapshot, so no answer mixes
  two versions;
* for an entry that also read the app DB (the cost endpoint reads the workload registry and the open
  recommendations), no commit has happened in this process since it was read (``app_db_generation``,
  bumped by SQLAlchemy listeners on every engine: when a transaction commits, and again when the
  connection that committed goes back to the pool, i.e. after the database has the commit, so a read
  that raced the commit is invalidated too), and it is younger than ``api.app_db_cache_s``, which
  bounds how long a write by another process (the recommender, the CLI) can take to show.

The cache is a bounded LRU (``api.response_cache_size`` entries); unknown ids and errors are never
cached.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.pool import Pool

from gpufinops.warehouse import Stamp

__all__ = ["CachedBody", "ResponseCache", "app_db_generation"]

_commits = itertools.count(1)
_generation = 0
_COMMITTED = "gpufinops_committed"


def _bump() -> None:
    global _generation
    _generation = next(_commits)


@event.listens_for(Engine, "commit")
def _on_commit(conn: Any) -> None:
    conn.info[_COMMITTED] = True  # the pool record's info: seen again at checkin
    _bump()


@event.listens_for(Pool, "checkin")
def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
    if record is not None and record.info.pop(_COMMITTED, False):
        _bump()


def app_db_generation() -> int:
    """How many SQLAlchemy commits this process has made (any engine): read it before reading the app DB;
    an entry read under an older generation is stale."""
    return _generation


@dataclass(frozen=True)
class CachedBody:
    """One serialised answer and what it is valid for."""

    body: bytes
    stamp: Stamp
    # the team that owns the answer (None: every line, scoped by the key instead); the route checks it
    team: str | None = None
    # app DB generation it was read under, and the monotonic deadline (None: it read no app DB)
    generation: int | None = None
    expires: float | None = None

    def valid(self, stamp: Stamp, now: float) -> bool:
        if stamp != self.stamp:
            return False
        if self.generation is None:
            return True
        return self.generation == _generation and self.expires is not None and now < self.expires


class ResponseCache:
    """A thread-safe bounded LRU of :class:`CachedBody` by request key."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, CachedBody] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, stamp: Stamp) -> CachedBody | None:
        now = time.monotonic()
        with self._lock:
            found = self._items.get(key)
            if found is None or not found.valid(stamp, now):
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Hashable, entry: CachedBody) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = entry
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
