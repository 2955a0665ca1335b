"""A real, local Prometheus holding back-filled data: for the tests, the bench and replaying a dataset.

Write samples as OpenMetrics (:func:`write_openmetrics`), turn them into TSDB blocks with
``promtool tsdb create-blocks-from openmetrics`` (:func:`backfill`), then serve them with
:class:`LocalPrometheus` on a free loopback port. Back-filled blocks must lie inside the retention,
hence the long default retention; they can be far in the past.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from gpufinops.errors import ConfigError, TerminalError

__all__ = ["Family", "write_openmetrics", "write_openmetrics_blocks", "backfill", "LocalPrometheus", "free_port"]

_BLOCK_S = 7200  # promtool cuts blocks at 2-hour boundaries of the epoch


@dataclass
class Family:
    """One metric family: its samples ``(labels, ts_seconds, value)``, each series in time order."""

    name: str
    samples: Iterable[tuple[Mapping[str, str], float, float]]
    type: str = "gauge"
    help: str = ""


def _fmt_value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _LabelCache:
    """Formats each label mapping once: generators yield the same dict for every sample of a series.

    Keyed by ``id``, so the mapping itself is kept alive here (a freed dict's id can be reused)."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Mapping[str, str], str]] = {}

    def text(self, labels: Mapping[str, str]) -> str:
        hit = self._cache.get(id(labels))
        if hit is not None and hit[0] is labels:
            return hit[1]
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        self._cache[id(labels)] = (labels, text)
        return text


def write_openmetrics(out: IO[str], families: Iterable[Family]) -> int:
    """Stream families to ``out`` (OpenMetrics text, timestamps in seconds); returns the sample count."""
    n = 0
    for fam in families:
        out.write(f"# HELP {fam.name} {fam.help or fam.name}\n# TYPE {fam.name} {fam.type}\n")
        cache = _LabelCache()
        for labels, ts, value in fam.samples:
            text = cache.text(labels)
            out.write(f"{fam.name}{{{text}}} {_fmt_value(value)} {ts:.3f}\n".replace(".000\n", "\n"))
            n += 1
    out.write("# EOF\n")
    return n


def write_openmetrics_blocks(out_dir: Path, families: Iterable[Family], *, block_s: int = _BLOCK_S) -> tuple[list[Path], int]:
    """Like :func:`write_openmetrics`, but one file per 2-hour block: promtool reads its whole input
    once per block it cuts, so one file per block back-fills a long range several times faster
    (and the files can be back-filled in parallel)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[int, IO[str]] = {}
    n = 0
    try:
        for fam in families:
            header = f"# HELP {fam.name} {fam.help or fam.name}\n# TYPE {fam.name} {fam.type}\n"
            started: set[int] = set()
            cache = _LabelCache()
            for labels, ts, value in fam.samples:
                block = int(ts // block_s)
                fh = files.get(block)
                if fh is None:
                    fh = files[block] = open(out_dir / f"block-{block:08d}.om", "w")
                if block not in started:
                    fh.write(header)
                    started.add(block)
                text = cache.text(labels)
                fh.write(f"{fam.name}{{{text}}} {_fmt_value(value)} {ts:.3f}\n".replace(".000\n", "\n"))
                n += 1
    finally:
        for fh in files.values():
            fh.write("# EOF\n")
            fh.close()
    return [out_dir / f"block-{b:08d}.om" for b in sorted(files)], n


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ConfigError(f"{name} is not on PATH (Debian packages 'prometheus' and its promtool are needed)")
    return path


def backfill(openmetrics: Path | Iterable[Path], tsdb_dir: Path, *, parallel: int | None = None,
             timeout_s: float = 1800) -> None:
    """``promtool tsdb create-blocks-from openmetrics`` for one file or several (``parallel`` at a time)."""
    tsdb_dir.mkdir(parents=True, exist_ok=True)
    files = [openmetrics] if isinstance(openmetrics, Path) else list(openmetrics)
    promtool = _tool("promtool")
    workers = max(1, parallel or os.cpu_count() or 1)

    def one(path: Path) -> None:
        proc = subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(path), str(tsdb_dir)],
            capture_output=True, text=True, timeout=timeout_s,
        )
        if proc.returncode != 0:
            raise TerminalError(f"promtool back-fill of {path} failed: {proc.stderr.strip()[-2000:]}")

    with ThreadPoolExecutor(workers) as pool:
        for fut in [pool.submit(one, f) for f in files]:
            fut.result()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalPrometheus:
    """``prometheus`` serving ``tsdb_dir`` on 127.0.0.1; a context manager that waits for ``/-/ready``."""

    def __init__(self, tsdb_dir: Path, *, retention: str = "10y", extra_args: Iterable[str] = (), ready_timeout_s: float = 60):
        self.tsdb_dir = Path(tsdb_dir)
        self.retention = retention
        self.extra_args = list(extra_args)
        self.ready_timeout_s = ready_timeout_s
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalPrometheus:
        config = self.tsdb_dir.parent / f"{self.tsdb_dir.name}-prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1h\n")  # no scrape jobs: it only serves the blocks
        self.port = free_port()
        self._log = open(self.tsdb_dir.parent / f"{self.tsdb_dir.name}-prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [
                _tool("prometheus"),
                f"--storage.tsdb.path={self.tsdb_dir}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                f"--config.file={config}",
                f"--storage.tsdb.retention.time={self.retention}",
                *self.extra_args,
            ],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise TerminalError(f"prometheus exited with {self.proc.returncode}; see {self._log_path()}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TerminalError(f"prometheus was not ready after {self.ready_timeout_s}s; see {self._log_path()}")

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the server has used so far; None where /proc is not available."""
        if self.proc is None:
            return None
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def _log_path(self) -> str:
        return getattr(self._log, "name", "?")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalPrometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
