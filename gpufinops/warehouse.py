"""The one way every part opens the warehouse, and how a build publishes a new one.

Layout under the home (``Settings.warehouse_path`` is the first name):

* ``warehouse.duckdb``: the live warehouse. Once a build has published, a symlink to one version file;
  before that (a home from an older release) a plain file, which the first build replaces.
* ``warehouse.d/<version>.duckdb``: the version files. A build writes a new one beside the live one
  (copied from it for an incremental build) and publishes it by renaming a new symlink over
  ``warehouse.duckdb`` (atomic). Older versions are unlinked at publish: a reader that still has one
  open keeps reading it (POSIX keeps an unlinked file until its last descriptor closes, and frees its
  space then); the next request opens the new one.
* ``warehouse.build.json``: the last build attempt (status, version, failed nodes), see
  :func:`last_build` and :func:`require_good_build`.
* ``warehouse.lock``: held (flock) by the build that is running, with its pid, host and start time.

Readers resolve the symlink each time they open, so each version has a path of its own (DuckDB caches
database instances by path) and a reader never sees a half-built file. :class:`Reader` is the shared
read model of the API, the dashboards and the reports: one read-only connection per published version,
a cursor per request, the version as the freshness stamp.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from gpufinops.errors import ConfigError, TerminalError, TransientError

__all__ = [
    "connect",
    "live_file",
    "published_version",
    "versions_dir",
    "build_record_path",
    "lock_path",
    "last_build",
    "write_build_record",
    "require_good_build",
    "LastBuildFailed",
    "Reader",
    "Snapshot",
    "Stamp",
]

_OPEN_RETRIES = 5


class LastBuildFailed(TerminalError):
    """The last build attempt did not succeed: the live warehouse is an older build."""


def versions_dir(link: Path | str) -> Path:
    """``<home>/warehouse.d`` beside the live ``warehouse.duckdb``."""
    link = Path(link)
    return link.with_name(link.stem + ".d")


def build_record_path(link: Path | str) -> Path:
    link = Path(link)
    return link.with_name(link.stem + ".build.json")


def lock_path(link: Path | str) -> Path:
    link = Path(link)
    return link.with_name(link.stem + ".lock")


def live_file(link: Path | str) -> Path:
    """The file the live warehouse is now (the symlink resolved; a plain file is itself)."""
    return Path(os.path.realpath(link))


def published_version(link: Path | str) -> str | None:
    """The published build version of the live warehouse (None: none yet; ``legacy`` for a plain file
    from before atomic publish)."""
    link = Path(link)
    if link.is_symlink():
        return live_file(link).stem
    return "legacy" if link.is_file() else None


def _version_of(link: Path | str, target: str) -> str:
    return Path(target).stem if Path(link).is_symlink() or Path(target).parent.name.endswith(".d") else "legacy"


def connect(path: Path | str, *, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to the live warehouse (``path`` is ``Settings.warehouse_path``, or a version
    file). A publish between resolving the link and opening the file is retried on the new version."""
    path = Path(path)
    for attempt in range(_OPEN_RETRIES):
        target = live_file(path)
        if read_only and not target.is_file():
            if path.is_symlink() and attempt + 1 < _OPEN_RETRIES:
                continue  # published and swept in between: resolve again
            raise ConfigError(f"warehouse {path} does not exist yet; run `gpufinops build` first")
        try:
            return duckdb.connect(str(target), read_only=read_only)
        except duckdb.IOException:
            if target.is_file() or attempt + 1 == _OPEN_RETRIES:
                raise
    raise ConfigError(f"warehouse {path} does not exist yet; run `gpufinops build` first")  # pragma: no cover


# ---------------------------------------------------------------- the build record


def last_build(link: Path | str) -> dict[str, Any] | None:
    """The last build attempt's record (None: no build has recorded one). ``status`` is ``success``,
    ``failed`` or ``running``; a ``running`` record whose build no longer holds the lock is reported as
    ``interrupted`` (the build was killed)."""
    path = build_record_path(link)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    if record.get("status") == "running" and not _lock_held(lock_path(link)):
        record["status"] = "interrupted"
    return record


def write_build_record(link: Path | str, record: dict[str, Any]) -> None:
    """Replace the build record atomically."""
    path = build_record_path(link)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, default=str))
    os.replace(tmp, path)


def _lock_held(path: Path) -> bool:
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def require_good_build(link: Path | str) -> dict[str, Any] | None:
    """Raise :class:`LastBuildFailed` when the last build attempt failed or was interrupted, naming the
    failure and the build that is served. The recommender and the reports call this: they refuse to
    write findings or send figures while the warehouse lags the lake. (The API and the dashboards keep
    serving the last good build.)"""
    record = last_build(link)
    if record is None or record.get("status") in ("success", "running"):
        return record
    served = published_version(link)
    where = live_file(link) if served else link
    what = record.get("error") or "; ".join(record.get("failed") or []) or "see the dbt logs"
    raise LastBuildFailed(
        f"the last build, started {record.get('started_at')}, {record['status']}: {what}; "
        f"serving build {served or 'none'} from {where}; fix the cause and rerun `gpufinops build`"
    )


# ---------------------------------------------------------------- the read model

Stamp = tuple[str, int, int, int, int, int]


def _stamp(link: str) -> Stamp:
    """(resolved path, inode, mtime, size) of the live file and (mtime, size) of its WAL: a publish
    changes the path; an in-place write to a plain file changes the rest."""
    for attempt in range(_OPEN_RETRIES):
        target = os.path.realpath(link)
        try:
            st = os.stat(target)
            break
        except FileNotFoundError as exc:
            # a publish between resolving the link and the stat swept the old version: resolve again
            if os.path.islink(link) and attempt + 1 < _OPEN_RETRIES:
                continue
            raise ConfigError(f"warehouse {link} does not exist yet; run `gpufinops build` first") from exc
    try:
        wal = os.stat(target + ".wal")
        wal_stamp = (wal.st_mtime_ns, wal.st_size)
    except FileNotFoundError:
        wal_stamp = (0, 0)
    return (target, st.st_ino, st.st_mtime_ns, st.st_size, *wal_stamp)


@dataclass(frozen=True)
class Snapshot:
    """One request's view: a cursor on one published version, and that version."""

    cursor: duckdb.DuckDBPyConnection
    version: str
    stamp: Stamp


@dataclass
class _Shared:
    con: duckdb.DuckDBPyConnection
    stamp: Stamp
    users: int = 0


class Reader:
    """The read model of the faces over one warehouse link.

    ``snapshot()`` gives a cursor of the read-only connection to the version that is live when it is
    called (opened on first use, in UTC); the requests in flight share the connection, a cursor each.
    When a build publishes, the next snapshot opens the new version and the old connection closes with
    its last cursor: a request never sees two versions, and a version switch happens between requests.
    ``connections_opened`` counts opens (one per version under steady load)."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self.connections_opened = 0
        self._lock = threading.Lock()
        self._shared: _Shared | None = None

    def stamp(self) -> Stamp:
        return _stamp(self.path)

    def version(self) -> str | None:
        return published_version(self.path)

    def _open(self) -> _Shared:
        for attempt in range(_OPEN_RETRIES):
            stamp = _stamp(self.path)
            try:
                con = duckdb.connect(stamp[0], read_only=True)
            except duckdb.IOException as exc:
                if not os.path.isfile(stamp[0]) and attempt + 1 < _OPEN_RETRIES:
                    continue  # swept by a publish in between: resolve again
                raise TransientError(f"warehouse {self.path} cannot be opened now: {exc}") from exc
            try:
                # global: every cursor of this connection starts in UTC
                con.execute("set global TimeZone = 'UTC'")
            except BaseException:
                con.close()
                raise
            self.connections_opened += 1
            return _Shared(con, stamp)
        raise ConfigError(f"warehouse {self.path} does not exist yet; run `gpufinops build` first")

    @contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        stamp = _stamp(self.path)
        stale = None
        with self._lock:
            shared = self._shared
            if shared is None or shared.stamp != stamp:
                shared = self._open()
                if self._shared is not None and self._shared.users == 0:
                    stale = self._shared
                self._shared = shared
            shared.users += 1
            try:
                cur = shared.con.cursor()
            except BaseException:
                shared.users -= 1
                raise
        if stale is not None:
            stale.con.close()
        try:
            yield Snapshot(cur, _version_of(self.path, shared.stamp[0]), shared.stamp)
        finally:
            cur.close()
            with self._lock:
                shared.users -= 1
                done = shared.users == 0 and shared is not self._shared
            if done:
                shared.con.close()

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.snapshot() as snap:
            yield snap.cursor

    def holds_connection(self) -> bool:
        with self._lock:
            return self._shared is not None

    def close(self) -> None:
        with self._lock:
            shared, self._shared = self._shared, None
        if shared is not None and shared.users == 0:
            shared.con.close()
