"""A small parser for a saved ``/metrics`` scrape: Prometheus text format 0.0.4 or OpenMetrics.

OpenMetrics is recognised by its ``# EOF`` line; its sample timestamps are seconds, those of the
text format milliseconds. ``# HELP``/``# TYPE``/``# UNIT`` and other comments are read past, an
OpenMetrics exemplar (`` # {...} v [ts]`` after the value) is ignored, a sample without labels is
skipped and counted, and anything else that does not parse is an :class:`InputError` naming the
file and line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpufinops.errors import InputError

__all__ = ["Sample", "ExpositionStats", "parse_exposition", "detect_openmetrics"]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(,|(?=\}))')
_ESCAPES = re.compile(r"\\(.)")
_SPECIAL_VALUES = {"nan": math.nan, "+inf": math.inf, "inf": math.inf, "-inf": -math.inf}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float
    ts_s: float | None  # seconds since the epoch, None when the line has no timestamp
    line: int


@dataclass
class ExpositionStats:
    lines: int = 0
    samples: int = 0
    unlabeled_skipped: int = 0
    openmetrics: bool = False


def detect_openmetrics(text: str) -> bool:
    return any(line.strip() == "# EOF" for line in text.splitlines()[-3:]) or "\n# EOF\n" in text


def parse_exposition(path: Path, stats: ExpositionStats | None = None) -> Iterator[Sample]:
    """Yield the labelled samples of ``path``; ``stats`` (if given) is filled as it goes."""
    stats = stats if stats is not None else ExpositionStats()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the exposition file: {exc}") from exc
    om = stats.openmetrics = detect_openmetrics(text)
    seen_eof = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stats.lines = lineno
        line = raw.strip()
        if seen_eof:
            if line:
                raise InputError(f"{path}:{lineno}: content after '# EOF'")
            continue
        if not line:
            continue
        if line.startswith("#"):
            if om and line == "# EOF":
                seen_eof = True
            elif om or line.startswith(("# HELP", "# TYPE", "# UNIT")):
                _check_comment(path, lineno, line)
            continue
        sample = _parse_sample(path, lineno, line, om)
        if not sample.labels:
            stats.unlabeled_skipped += 1
            continue
        stats.samples += 1
        yield sample


def _check_comment(path: Path, lineno: int, line: str) -> None:
    parts = line.split(None, 3)
    if len(parts) >= 2 and parts[1] in ("HELP", "TYPE", "UNIT"):
        if len(parts) < 3 or not _NAME.fullmatch(parts[2]):
            raise InputError(f"{path}:{lineno}: malformed '# {parts[1]}' line: {line[:120]!r}")


def _parse_sample(path: Path, lineno: int, line: str, om: bool) -> Sample:
    def bad(why: str) -> InputError:
        return InputError(f"{path}:{lineno}: {why}: {line[:160]!r}")

    m = _NAME.match(line)
    if not m:
        raise bad("no metric name")
    name = m.group(0)
    pos = m.end()
    labels: dict[str, str] = {}
    if pos < len(line) and line[pos] == "{":
        pos += 1
        while True:
            while pos < len(line) and line[pos] == " ":
                pos += 1
            if pos < len(line) and line[pos] == "}":
                pos += 1
                break
            lm = _LABEL.match(line, pos)
            if not lm:
                raise bad("malformed label set")
            if lm.group(1) in labels:
                raise bad(f"label {lm.group(1)!r} repeated")
            labels[lm.group(1)] = _ESCAPES.sub(_unescape, lm.group(2))
            pos = lm.end()
    rest = line[pos:]
    if rest and not rest[0].isspace():
        raise bad("expected a space before the value")
    if om and " # " in rest:
        rest = rest.split(" # ", 1)[0]  # an exemplar
    fields = rest.split()
    if len(fields) not in (1, 2):
        raise bad("expected 'value [timestamp]'")
    value = _float(fields[0])
    if value is None:
        raise bad(f"value {fields[0]!r} is not a number")
    ts: float | None = None
    if len(fields) == 2:
        t = _float(fields[1])
        if t is None or not math.isfinite(t):
            raise bad(f"timestamp {fields[1]!r} is not a number")
        if not om and not re.fullmatch(r"-?\d+", fields[1]):
            raise bad(f"timestamp {fields[1]!r} is not integer milliseconds")
        ts = t if om else t / 1000.0
        if not (0 <= ts < _MAX_TS):
            raise bad(f"timestamp {fields[1]!r} is out of range (before 1970 or after 2200; "
                      f"{'seconds' if om else 'milliseconds'} since the epoch expected)")
    return Sample(name, labels, value, ts, lineno)


_MAX_TS = 7258118400.0  # 2200-01-01T00:00:00Z


def _unescape(m: re.Match[str]) -> str:
    c = m.group(1)
    return "\n" if c == "n" else c


def _float(s: str) -> float | None:
    special = _SPECIAL_VALUES.get(s.lower())
    if special is not None:
        return special
    try:
        return float(s)
    except ValueError:
        return None
