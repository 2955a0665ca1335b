"""Parse the times and durations the Prometheus ingest accepts on the command line."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from gpufinops.errors import InputError

__all__ = ["parse_time", "parse_duration", "MAX_TIME", "check_time"]

# Latest time accepted anywhere (a run window must fit after it; Python and DuckDB stop at 9999).
MAX_TIME = datetime(2200, 1, 1, tzinfo=UTC)
_MIN_TIME = datetime(1970, 1, 1, tzinfo=UTC)


def check_time(t: datetime, *, option: str) -> datetime:
    """``t`` if it lies in [1970, 2200); else :class:`InputError` naming ``option``."""
    if not (_MIN_TIME <= t < MAX_TIME):
        raise InputError(f"{option} {t.isoformat()} is out of range: give a time between 1970 and 2200")
    return t

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str, *, option: str = "time") -> datetime:
    """ISO 8601 (a naive time is UTC), Unix seconds, or ``now``."""
    s = text.strip()
    if s.lower() == "now":
        return datetime.now(UTC)
    try:
        seconds = float(s)
    except ValueError:
        seconds = None
    if seconds is not None:
        if not math.isfinite(seconds) or not (0 <= seconds < MAX_TIME.timestamp()):
            raise InputError(f"{option} {text!r} is out of range: give Unix seconds between 1970 and 2200")
        return datetime.fromtimestamp(seconds, tz=UTC)
    try:
        t = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InputError(f"{option} {text!r} is not an ISO 8601 time, Unix seconds or 'now'") from None
    except OverflowError:
        raise InputError(f"{option} {text!r} is out of range: give a time between 1970 and 2200") from None
    try:
        t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    except OverflowError:
        raise InputError(f"{option} {text!r} is out of range: give a time between 1970 and 2200") from None
    return check_time(t, option=option)


def parse_duration(text: str, *, option: str = "duration") -> float:
    """Prometheus-style durations (``90s``, ``5m``, ``1h30m``) or plain seconds; returns seconds."""
    s = text.strip()
    try:
        seconds = float(s)
    except ValueError:
        parts = _DURATION.findall(s)
        if not parts or "".join(n + u for n, u in parts) != s:
            raise InputError(f"{option} {text!r} is not a duration like 60s, 5m or 1h30m") from None
        seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(f"{option} {text!r} must be a positive, finite duration")
    return seconds
