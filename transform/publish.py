"""Atomic publish of a warehouse build (layout in ``gpufinops.warehouse``).

A build takes the build lock, writes a new version file beside the live one (a copy of it for an
incremental build), and, once dbt succeeded, renames a new symlink over ``warehouse.duckdb``. A dbt
build writes the new version under one fixed name (``warehouse.d/_building.duckdb``, :data:`STAGE`)
that is renamed to ``<version>.duckdb`` at publish: dbt's profile (the DuckDB path) is then the same
in every build, so dbt can reuse its saved parse (partial parsing) instead of parsing the project again. Until
that rename the live warehouse is untouched, so a build that fails or is killed (SIGKILL) at any point
leaves it as it was; the next build sweeps what the dead one left in ``warehouse.d``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from gpufinops.errors import Conflict
from gpufinops.warehouse import live_file, lock_path, versions_dir

__all__ = ["SPARE", "STAGE", "TRASH", "BuildLocked", "build_lock", "defer_removal", "new_version", "prepare", "publish", "discard",
           "make_spare", "spare_path", "wait_for_removals"]


STAGE = "_building.duckdb"  # the fixed name a dbt build writes its version under (renamed at publish)
SPARE = ".spare."  # prefix of a ready copy of a published version: .spare.<version>.duckdb (make_spare)
TRASH = ".trash."  # prefix of a superseded version set aside by publish, unlinked in the background (defer_removal)

_defer = False
_removals: list[threading.Thread] = []


def defer_removal(on: bool = True) -> None:
    """Make :func:`publish` rename the superseded versions aside (``.trash.<name>``) and unlink them
    in a background thread. A long-lived build worker does: unlinking a version file of the 1,000-node
    warehouse (1.9 GB) took 0.33 s of each hourly build, and nothing waits for it. A process that
    exits first leaves the set-aside files to the next build's sweep."""
    global _defer
    _defer = on


def wait_for_removals(timeout: float | None = None) -> None:
    """Wait for the background unlinks :func:`publish` started (tests; a worker shutting down)."""
    while _removals:
        _removals.pop().join(timeout)


def _unlink_all(files: list[Path]) -> None:
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            f.unlink()


class BuildLocked(Conflict):
    """Another build holds the build lock; the message names it (pid, host, start time)."""


@contextlib.contextmanager
def build_lock(link: Path) -> Iterator[dict[str, object]]:
    """Hold ``warehouse.lock`` (flock: released by the kernel even when the build is killed) with this
    build's pid, host and start time in it; a second build refuses, naming the first."""
    path = lock_path(link)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
        except ValueError:
            holder = {}
        os.close(fd)
        raise BuildLocked(
            f"another build is running: pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, "
            f"started {holder.get('started_at', '?')} (lock {path}); wait for it to finish, or stop it"
        ) from None
    me: dict[str, object] = {"pid": os.getpid(), "host": socket.gethostname(),
                             "started_at": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        yield me
    finally:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def new_version() -> str:
    """A version name that sorts by build start time (microseconds: unique under the lock)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def _copy(src: Path, dst: Path) -> None:
    """Copy a file in the kernel (copy_file_range: a reflink or a server-side copy where the file
    system offers one), else through user space."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size = os.fstat(fin.fileno()).st_size
        try:
            done = 0
            while done < size:
                n = os.copy_file_range(fin.fileno(), fout.fileno(), size - done)
                if n == 0:
                    break
                done += n
            if done == size:
                return
        except OSError:
            pass
        fin.seek(0)
        fout.seek(0)
        fout.truncate()
        shutil.copyfileobj(fin, fout, 8 << 20)


def _sweep(link: Path, keep: Path | None, *, defer: bool = False) -> None:
    """Unlink every version file but ``keep`` (a reader holding one keeps reading it until it closes).
    ``defer``: rename them aside (:data:`TRASH`) and unlink them in a background thread; set-aside files
    a process left (it exited first) go with them."""
    folder = versions_dir(link)
    if not folder.is_dir():
        return
    aside: list[Path] = []
    for f in folder.iterdir():
        if keep is not None and f.name in (keep.name, keep.name + ".wal"):
            continue
        if f.name.startswith(SPARE):  # prepare uses or removes them
            continue
        if f.name.startswith(TRASH) and f.is_file():
            aside.append(f)
            continue
        if f.name.endswith((".duckdb", ".duckdb.wal", ".duckdb.tmp")):
            if f.is_dir():  # DuckDB's spill folder (<file>.tmp) of a build that was killed
                shutil.rmtree(f, ignore_errors=True)
                continue
            if defer:
                trash = f.with_name(TRASH + f.name)
                with contextlib.suppress(FileNotFoundError):
                    os.replace(f, trash)
                    aside.append(trash)
                continue
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
    if aside and defer:
        worker = threading.Thread(target=_unlink_all, args=(aside,), name="version-removal", daemon=True)
        _removals[:] = [t for t in _removals if t.is_alive()]
        _removals.append(worker)
        worker.start()
    else:
        _unlink_all(aside)


def prepare(link: Path, version: str, *, copy: bool, stage: bool = False) -> tuple[Path, float]:
    """The new version file (a copy of the live one when ``copy``), after sweeping what killed builds
    left; (path, seconds the copy took). ``stage``: under the fixed name :data:`STAGE`, which
    :func:`publish` renames to ``<version>.duckdb``."""
    folder = versions_dir(link)
    folder.mkdir(parents=True, exist_ok=True)
    live = live_file(link) if link.exists() else None
    _sweep(link, live if live is not None and live.parent == folder else None)
    new = folder / (STAGE if stage else f"{version}.duckdb")
    took = 0.0
    spare = _take_spare(folder, live, new) if copy and live is not None and live.parent == folder else False
    if copy and not spare and live is not None and live.is_file():
        started = time.monotonic()
        tmp = new.with_name(new.name + ".tmp")
        _copy(live, tmp)
        wal = live.with_name(live.name + ".wal")
        if wal.is_file():  # a plain file from before atomic publish may have one
            _copy(wal, tmp.with_name(new.name + ".wal"))
        os.replace(tmp, new)
        took = time.monotonic() - started
    return new, took


def spare_path(live: Path) -> Path:
    """Where make_spare puts the spare copy of the published version file ``live``."""
    return live.with_name(SPARE + live.name)


def _take_spare(folder: Path, live: Path, new: Path) -> bool:
    """Rename the spare copy of the live version (make_spare) to ``new``; remove every other spare (of
    an older version, or one still being written). False when there was none to take."""
    taken = False
    for f in folder.iterdir():
        if not f.name.startswith(SPARE):
            continue
        if f == spare_path(live) and not taken:
            try:
                os.replace(f, new)
                taken = True
                continue
            except FileNotFoundError:
                continue
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
    return taken


def make_spare(link: Path) -> Path | None:
    """A copy of the live version, made while no build runs, that the next incremental build takes
    instead of copying the live file itself (:func:`prepare`): the build worker makes one after each
    build, so the copy and its write to disk are out of the hour's way. A published version is never
    written again (readers open it read-only), so the copy stays exact; a spare of a version that is
    no longer live is removed by the next build. Costs one more file of the warehouse's size."""
    if not link.exists():
        return None
    live = live_file(link)
    folder = versions_dir(link)
    if live.parent != folder or not live.is_file() or live.with_name(live.name + ".wal").exists():
        return None
    done = spare_path(live)
    for f in folder.glob(SPARE + "*.duckdb"):  # a finished spare of an older version (a full build since)
        if f != done:
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
    for f in folder.glob(SPARE + "*.partial"):  # a copy a killed worker left half-written
        if not _pid_alive(f.name.rsplit(".", 2)[-2]):
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
    if done.exists():
        return done
    partial = folder / f"{SPARE}{live.name}.{os.getpid()}.partial"
    try:
        _copy(live, partial)
        _fsync(partial)
        if live_file(link) != live:  # a build published meanwhile: this copy is of an older version
            partial.unlink()
            return None
        os.replace(partial, done)
    except FileNotFoundError:  # a build removed it (or the live file) meanwhile
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        return None
    return done


def _pid_alive(pid: str) -> bool:
    """Whether process ``pid`` (a spare's writer, from its file name) still runs on this host."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):  # not a pid, or no such process
        return False
    except PermissionError:  # it runs, as another user
        return True
    return True


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(link: Path, new: Path, version: str | None = None) -> Path:
    """Make ``new`` the live warehouse: a symlink renamed over ``link`` (atomic), then sweep the rest.
    ``version``: first rename ``new`` (a staged build, :data:`STAGE`) to ``<version>.duckdb``. Returns
    the published file."""
    wal = new.with_name(new.name + ".wal")
    if wal.exists():  # dbt-duckdb closes (and so checkpoints) its database; make sure of it
        import duckdb

        duckdb.connect(str(new)).close()
    if version is not None and new.name != f"{version}.duckdb":
        final = new.with_name(f"{version}.duckdb")
        os.replace(new, final)  # closed and checkpointed: the file is the whole database
        new = final
    _fsync(new)
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(os.path.relpath(new, link.parent), tmp)
    os.replace(tmp, link)
    _fsync(link.parent)
    with contextlib.suppress(FileNotFoundError):
        link.with_name(link.name + ".wal").unlink()  # a plain file's WAL from before atomic publish
    _sweep(link, new, defer=_defer)
    return new


def discard(new: Path) -> None:
    """Remove a failed build's version file (and its WAL); the live warehouse is untouched."""
    for f in (new, new.with_name(new.name + ".wal"), new.with_name(new.name + ".tmp")):
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
