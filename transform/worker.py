"""A long-lived build worker: ``gpufinops serve builder`` runs the builds that ``gpufinops build``
hands it over a Unix socket in the home (``<home>/build-worker.sock``).

An hourly build in a fresh process pays, before dbt runs a single model, for the interpreter and
dbt's imports and for dbt's load of its saved parse of the project (a few seconds of the hour). The
worker pays them once: it keeps dbt imported and the parsed project in memory
(:class:`transform.runner.ManifestCache`, parsed again whenever the project files or the build's vars
change), and runs each build in-process through :func:`transform.runner.run_build`, the same
function, build lock and atomic publish as an in-process build. What a build returns, or the error
it raises, goes back to the client, which prints it as an in-process build would.

Protocol: one JSON object per line each way. Requests ``{"op": "ping"}`` and ``{"op": "build",
"home": ..., "full": bool, "select": [...] | null, "unit_tests": bool, "all_tests": bool, "summary":
bool}``; answers ``{"ok": true, ...}`` or ``{"ok": false, "error": {"kind", "message"}}``. A worker
serves the one home it was started with and refuses a request for another.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import socket
import socketserver
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpufinops.errors import ConfigError, GpufinopsError, TerminalError

__all__ = ["SOCKET_NAME", "WorkerUnavailable", "config_of", "remote_build", "result_from_answer", "summary_from_answer", "serve", "socket_path", "worker_alive"]

SOCKET_NAME = "build-worker.sock"
_log = logging.getLogger(__name__)


class WorkerUnavailable(Exception):
    """No worker answers on the home's socket (the client then builds in-process)."""


def socket_path(home: Path | str) -> Path:
    return Path(home).resolve() / SOCKET_NAME


def _ask(path: Path, request: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    if not path.exists():
        raise WorkerUnavailable(f"no build worker socket at {path}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(path))
        except OSError as exc:  # a stale socket file of a worker that is gone
            raise WorkerUnavailable(f"no build worker answers on {path}: {exc}") from None
        sock.sendall(json.dumps(request).encode() + b"\n")
        with sock.makefile("rb") as f:
            line = f.readline()
    finally:
        sock.close()
    if not line:
        raise TerminalError(f"the build worker on {path} closed the connection without an answer (did it die?)")
    answer: dict[str, Any] = json.loads(line)
    return answer


def worker_alive(home: Path | str, timeout: float = 2.0) -> dict[str, Any] | None:
    """The worker's ping answer (pid, home, builds, parses), or None when none answers."""
    try:
        return _ask(socket_path(home), {"op": "ping"}, timeout)
    except (WorkerUnavailable, OSError, ValueError):
        return None


def remote_build(home: Path | str, *, config: str = "", full: bool = False, select: list[str] | None = None, unit_tests: bool = False,
                 all_tests: bool = False, summary: bool = True) -> dict[str, Any]:
    """Run a build in the home's worker; the answer's ``result`` (BuildResult fields) and ``summary``
    (ShowbackSummary fields, or None). Raises :class:`WorkerUnavailable` when no worker answers, and
    the build's own error class (BuildFailed, BuildLocked, ConfigError, ...) when it failed."""
    from transform.runner import BuildFailed, BuildLocked

    home = Path(home).resolve()
    answer = _ask(socket_path(home), {"op": "build", "home": str(home), "config": config, "full": full, "select": select,
                                      "unit_tests": unit_tests, "all_tests": all_tests, "summary": summary}, None)
    if answer.get("ok"):
        return answer
    err = answer.get("error") or {}
    kind, message = err.get("kind"), str(err.get("message") or "the build worker reported an error")
    if kind == "BuildFailed":
        raise BuildFailed(message, _result_of(err.get("result") or {}))
    if kind == "BuildLocked":
        raise BuildLocked(message)
    if kind == "ConfigError":
        raise ConfigError(message)
    raise TerminalError(f"build worker: {message}" if kind == "internal" else message)


def config_of(settings: Any) -> str:
    return str(Path(settings.config).resolve()) if getattr(settings, "config", None) else ""


def _result_of(data: dict[str, Any]) -> Any:
    """A :class:`BuildResult` from its JSON fields."""
    from transform.runner import BuildResult, NodeResult

    fields = dict(data)
    fields["nodes"] = [NodeResult(**n) for n in fields.get("nodes", [])]
    fields["warehouse"] = Path(fields.get("warehouse") or ".")
    fields.setdefault("success", False)
    fields.setdefault("seconds", 0.0)
    fields.setdefault("full_refresh", False)
    return BuildResult(**fields)


def result_from_answer(answer: dict[str, Any]) -> Any:
    """The :class:`BuildResult` of a worker's answer."""
    return _result_of(answer["result"])


def summary_from_answer(answer: dict[str, Any]) -> Any:
    """The :class:`ShowbackSummary` of a worker's answer, or None."""
    from transform.summary import ShowbackSummary, TenantLine

    data = answer.get("summary")
    if not data:
        return None
    return ShowbackSummary(**{**data, "top_tenants": [TenantLine(**t) for t in data.get("top_tenants", [])]})


def _jsonable(obj: Any) -> Any:
    data = asdict(obj)
    for k, v in data.items():
        if isinstance(v, Path):
            data[k] = str(v)
    return data


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline()
        try:
            request = json.loads(line or b"{}")
            answer = self.server.worker.answer(request)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the client as an answer
            answer = {"ok": False, "error": {"kind": "internal", "message": f"{type(exc).__name__}: {exc}"}}
        with contextlib.suppress(OSError):
            self.wfile.write(json.dumps(answer).encode() + b"\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    worker: _Worker


class _Worker:
    def __init__(self, settings: Any) -> None:
        from transform.publish import defer_removal
        from transform.runner import ManifestCache, use_manifest_cache

        self.settings = settings
        self.home = Path(settings.home).resolve()
        self.config = config_of(settings)
        self.cache = ManifestCache()
        use_manifest_cache(self.cache)
        defer_removal(True)  # a superseded version is unlinked after the answer, not before it
        self.builds = 0
        self._one = threading.Lock()  # dbt runs one invocation per process at a time

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            return {"ok": True, "pid": os.getpid(), "home": str(self.home), "builds": self.builds,
                    "parses": self.cache.parses, "frozen": gc.get_freeze_count()}
        if op != "build":
            return {"ok": False, "error": {"kind": "internal", "message": f"unknown request {op!r}"}}
        if Path(str(request.get("home"))).resolve() != self.home:
            return {"ok": False, "error": {"kind": "ConfigError", "message": (
                f"the build worker on {socket_path(self.home)} serves home {self.home}, not {request.get('home')}")}}
        if str(request.get("config") or "") != self.config:
            return {"ok": False, "error": {"kind": "ConfigError", "message": (
                f"the build worker on {socket_path(self.home)} was started with settings file {self.config or '(none)'}, "
                f"this build names {request.get('config') or '(none)'}: restart the worker with the same settings, "
                "or build with --in-process")}}
        return self._build(request)

    def _build(self, request: dict[str, Any]) -> dict[str, Any]:
        from transform.runner import BuildFailed, BuildLocked, run_build
        from transform.summary import showback_summary

        if not self._one.acquire(blocking=False):  # what the build lock tells an in-process build
            return {"ok": False, "error": {"kind": "BuildLocked", "message": (
                f"another build is running in the build worker (pid {os.getpid()}, {socket_path(self.home)}); "
                "wait for it to finish")}}
        try:
            started = time.perf_counter()
            try:
                result = run_build(self.settings, full_refresh=bool(request.get("full")), select=request.get("select"),
                                   unit_tests=bool(request.get("unit_tests")), all_tests=bool(request.get("all_tests")),
                                   engine="duckdb")
            except BuildFailed as exc:
                return {"ok": False, "error": {"kind": "BuildFailed", "message": str(exc), "result": _jsonable(exc.result)}}
            except (BuildLocked, ConfigError) as exc:
                return {"ok": False, "error": {"kind": type(exc).__name__, "message": str(exc)}}
            except GpufinopsError as exc:
                return {"ok": False, "error": {"kind": "TerminalError", "message": str(exc)}}
            self.builds += 1
            summary = None
            if request.get("summary") and not request.get("select"):
                summary = _jsonable(showback_summary(result.warehouse))
            _log.info("build %s published in %.1f s", result.version, time.perf_counter() - started)
            self.spare_soon()
            return {"ok": True, "result": _jsonable(result), "summary": summary, "worker_pid": os.getpid()}
        finally:
            self._one.release()

    def spare_soon(self) -> None:
        """Copy the live version in the background (transform.publish.make_spare): the next
        incremental build starts from that copy instead of copying the live file itself."""
        from transform.publish import make_spare

        link = Path(os.path.abspath(self.settings.warehouse_path))

        def run() -> None:
            try:
                made = make_spare(link)
            except OSError as exc:  # a full disk: the next build copies the live file itself
                _log.warning("no spare copy of the live warehouse: %s", exc)
                return
            if made is not None:
                _log.info("spare copy of the live warehouse ready: %s", made.name)

        threading.Thread(target=run, name="spare-copy", daemon=True).start()


def serve(settings: Any, *, ready: Any = None) -> None:
    """Serve builds for ``settings.home`` on its socket until interrupted. The project is parsed
    once at start (with the vars of a build of this home), so the first build is already warm.
    ``ready(path)`` is called once the socket listens."""
    path = socket_path(settings.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    if worker_alive(settings.home) is not None:
        raise ConfigError(f"a build worker already serves {path}")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a stale socket of a worker that is gone
    worker = _Worker(settings)
    _warm(worker, settings)
    worker.spare_soon()
    server = _Server(str(path), _Handler)
    server.worker = worker
    try:
        if ready is not None:
            ready(path)
        server.serve_forever(poll_interval=0.5)
    finally:
        from transform.publish import wait_for_removals

        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        wait_for_removals(60)


def _warm(worker: _Worker, settings: Any) -> None:
    """Import dbt and parse the project with the arguments an incremental build of this home uses."""
    from gpufinops.warehouse import versions_dir
    from transform import runner
    from transform.publish import STAGE

    if not Path(settings.lake_dir).is_dir():
        return  # nothing to build yet: the first build parses
    link = Path(os.path.abspath(settings.warehouse_path))
    work = Path(settings.home).resolve() / "dbt"
    common = runner.dbt_common_args(work, runner.dbt_vars(settings))
    env = runner.dbt_environment(settings, work, versions_dir(link) / STAGE, full_refresh=False)
    with runner._environment(env):
        worker.cache.get(common)
