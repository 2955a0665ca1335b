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
cached. A miss is computed once however many requests ask for the key at the same moment
(:meth:`ResponseCache.answer`: the others await the same computation, if it started under the same
warehouse stamp and app DB generation), so an expiry under load costs one computation, not one per
client in flight.

:class:`CachedReadMiddleware` serves a repeat of a GET the route already answered (the same path, the
same raw query string, a caller with the same scope) straight from this cache, before routing: the
token is checked as always (embedded tokens; an OIDC deployment goes through the route), the answer
must still be valid as above, and a team caller must be allowed the answer's team, or the request goes
to the route, which answers it, errors included, as it always does.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.pool import Pool
from starlette.concurrency import run_in_threadpool

from gpufinops.warehouse import Stamp

__all__ = ["CachedBody", "CachedReadMiddleware", "ResponseCache", "app_db_generation", "request_key", "view_of"]

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
    # whether a caller must be allowed ``team`` (the cost of one workload), and the route it came from
    # (for the metrics' route label when the middleware serves it)
    check_team: bool = False
    route: Any = None

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
        # key -> (stamp, generation, the computation in flight); touched on the event loop only
        self._flights: dict[Hashable, tuple[Stamp | None, int, asyncio.Future[tuple[CachedBody, bool]]]] = {}
        self.hits = 0
        self.misses = 0
        self.computed = 0

    async def answer(self, key: Hashable, stamp: Stamp | None,
                     compute: Callable[[], tuple[CachedBody, bool]], raw_key: Hashable | None = None) -> CachedBody:
        """The cached answer for ``key`` under ``stamp`` (None: no warehouse yet, never a hit), or the
        result of ``compute`` (run in the threadpool; returns the answer and whether it may be kept),
        shared by every request that asks while it runs."""
        if stamp is not None and self.size > 0:
            hit = self.get(key, stamp)
            if hit is not None:
                if raw_key is not None:
                    self.put(raw_key, hit)
                return hit
        loop = asyncio.get_running_loop()
        generation = _generation
        flight = self._flights.get(key)
        if flight is None or flight[0] != stamp or flight[1] != generation or flight[2].get_loop() is not loop:
            future: asyncio.Future[tuple[CachedBody, bool]] = asyncio.ensure_future(run_in_threadpool(compute))
            flight = (stamp, generation, future)
            self._flights[key] = flight

            def done(f: asyncio.Future[tuple[CachedBody, bool]], key: Hashable = key,
                     flight: Any = flight) -> None:
                if self._flights.get(key) is flight:
                    del self._flights[key]
                if not f.cancelled() and f.exception() is None:
                    body, keep = f.result()
                    if keep:
                        self.put(key, body)

            future.add_done_callback(done)
            self.computed += 1
        body, keep = await asyncio.shield(flight[2])
        if keep and raw_key is not None:
            self.put(raw_key, body)
        return body

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


def view_of(actor: Any) -> tuple[str, ...] | None:
    """What of the warehouse a caller may see: None = everything (admin, finance), else its teams."""
    return None if (actor.is_admin or actor.is_finance) else tuple(sorted(actor.member_teams))


def request_key(scope: Any, view: tuple[str, ...] | None) -> tuple[Any, ...]:
    """The key of a request as it arrived: path, raw query string and the caller's view."""
    return ("raw", scope["path"], scope.get("query_string", b""), view)


Scope_ = dict[str, Any]


class CachedReadMiddleware:
    """Pure ASGI: a GET whose (path, query string, caller's view) a route answered before and whose
    answer is still valid is sent from the cache without routing or dependency solving."""

    def __init__(self, app: Any, ctx: Any) -> None:
        self.app = app
        self.ctx = ctx

    def _hit(self, scope: Scope_) -> CachedBody | None:
        ctx = self.ctx
        if ctx.auth.oidc is not None or ctx.responses.size <= 0:
            return None
        header = None
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        if header is None:
            return None
        try:
            actor = ctx.auth.authenticate(header)
            stamp = ctx.warehouse.reader.stamp()
        except Exception:  # noqa: BLE001 - any refusal or error: the route answers it
            return None
        hit: CachedBody | None = ctx.responses.get(request_key(scope, view_of(actor)), stamp)
        if hit is None or (hit.check_team and not actor.can_see_team(hit.team)):
            return None
        return hit

    async def __call__(self, scope: Scope_, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            hit = self._hit(scope)
            if hit is not None:
                if hit.route is not None:
                    scope["route"] = hit.route
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-length", str(len(hit.body)).encode()),
                                        (b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": hit.body})
                return
        await self.app(scope, receive, send)
