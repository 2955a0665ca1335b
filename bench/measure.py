"""Run a stage as a child process and measure its wall time and peak RSS (via ``wait4``)."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

__all__ = ["StageResult", "run_stage"]


@dataclass
class StageResult:
    stage: str
    scale: str
    wall_s: float
    peak_rss_mb: float
    ok: bool
    detail: str = ""


def run_stage(stage: str, scale: str, argv: list[str], *, env: dict[str, str] | None = None,
              detail: str = "") -> StageResult:
    """Run ``argv``; peak RSS is the child's maximum resident set (ru_maxrss, KiB on Linux). A Linux
    child starts from its parent's peak (the fork's copy of the parent's memory counts), so a peak
    no higher than this process's own is flagged as not measurable."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env={**os.environ, **(env or {})})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if usage.ru_maxrss <= own:
        detail += f"{'; ' if detail else ''}peak RSS at most the bench process's own ({own / 1024:.0f} MB): not measured"
    return StageResult(stage, scale, round(wall, 1), round(usage.ru_maxrss / 1024, 0), proc.returncode == 0, detail)
