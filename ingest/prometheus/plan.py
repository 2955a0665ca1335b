"""Split a requested range into requests Prometheus will answer and we can hold.

By time: every window holds at most ``max_points_per_series`` grid points (Prometheus refuses more
than 11,000 points per series) and at most ``max_window_s``; each window becomes one lake run.
By series: a pre-query of the series index sizes each window, and the split-label values
are packed into groups whose requests stay under ``max_points_per_request`` (series × points).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gpufinops.errors import ConfigError
from ingest.prometheus.client import PromClient
from ingest.prometheus.queries import MetricLoader

__all__ = ["Window", "SplitLimits", "time_windows", "align_down", "series_groups"]

PROMETHEUS_MAX_POINTS = 11_000


@dataclass(frozen=True)
class SplitLimits:
    max_points_per_series: int = PROMETHEUS_MAX_POINTS
    max_points_per_request: int = 500_000  # ~10 MB of JSON (DESIGN §8: 288 k points = 5.4 MB)
    max_window_s: float = 86_400.0
    lookback_s: float = 300.0  # how far before a window the queries look (rate window, lookback)

    def __post_init__(self) -> None:
        if not 1 <= self.max_points_per_series <= PROMETHEUS_MAX_POINTS:
            raise ConfigError(f"max_points_per_series must be in 1..{PROMETHEUS_MAX_POINTS}, got {self.max_points_per_series}")
        if self.max_points_per_request < 1:
            raise ConfigError(f"max_points_per_request must be positive, got {self.max_points_per_request}")


@dataclass(frozen=True)
class Window:
    """A lake run's window ``[start, end)`` and the grid ``start, start+step, ..., last`` queried in it."""

    start: datetime
    end: datetime
    step_s: float

    @property
    def points(self) -> int:
        return math.ceil((self.end - self.start).total_seconds() / self.step_s - 1e-9)

    @property
    def last(self) -> datetime:
        return self.start + timedelta(seconds=(self.points - 1) * self.step_s)


def align_down(t: datetime, step_s: float) -> datetime:
    """The grid is aligned to multiples of the step since the epoch, so re-runs query the same points."""
    epoch = t.timestamp()
    return datetime.fromtimestamp(math.floor(epoch / step_s + 1e-9) * step_s, tz=UTC)


def time_windows(start: datetime, end: datetime, step_s: float, limits: SplitLimits) -> list[Window]:
    if step_s <= 0:
        raise ConfigError(f"step must be positive, got {step_s}s")
    start = align_down(start, step_s)
    span = min(limits.max_points_per_series * step_s, max(limits.max_window_s, step_s))
    span = math.floor(span / step_s) * step_s
    out: list[Window] = []
    t = start
    while t < end:
        nxt = min(t + timedelta(seconds=span), end)
        out.append(Window(t, nxt, step_s))
        t = nxt
    return out


_RE_SPECIAL = re.compile(r"([\\.+*?()\[\]{}|^$])")


def _regex_alternation(values: list[str]) -> str:
    alt = "|".join(_RE_SPECIAL.sub(r"\\\1", v) for v in values)
    return alt.replace("\\", "\\\\").replace('"', '\\"')  # then as a PromQL string literal


def series_groups(
    client: PromClient,
    loaders: list[MetricLoader],
    split_labels: tuple[str, ...],
    window: Window,
    limits: SplitLimits,
) -> list[str]:
    """Label matchers, one per request group; ``[""]`` when the whole window fits one request.

    The sizing reads ``/api/v1/series`` (the index only, no samples, so it stays cheap however
    long the window) for all loaders at once, and counts series per metric and split-label value.
    """
    points = window.points
    budget = max(1, limits.max_points_per_request // points)  # series per request
    selectors = [s for loader in loaders for s in loader.count_selector()]
    begin = window.start - timedelta(seconds=limits.lookback_s)
    per_metric: dict[tuple[str, tuple[int, str]], int] = defaultdict(int)
    for labels in client.series(selectors, begin, window.last):
        key = next(((i, labels[n]) for i, n in enumerate(split_labels) if labels.get(n)), (-1, ""))
        per_metric[(labels.get("__name__", ""), key)] += 1
    weights: dict[tuple[int, str], int] = defaultdict(int)  # (split label index, value) -> series
    for (_metric, key), n in per_metric.items():
        weights[key] = max(weights[key], n)  # the largest request of the group decides
    if sum(weights.values()) <= budget:
        return [""]
    groups: list[str] = []
    for i, label in enumerate(split_labels):
        empty_before = [f'{n}=""' for n in split_labels[:i]]
        batch: list[str] = []
        size = 0
        for (j, value), n in sorted(weights.items()):
            if j != i:
                continue
            if batch and size + n > budget:
                groups.append(",".join([*empty_before, f'{label}=~"{_regex_alternation(batch)}"']))
                batch, size = [], 0
            batch.append(value)
            size += n
        if batch:
            groups.append(",".join([*empty_before, f'{label}=~"{_regex_alternation(batch)}"']))
    if (-1, "") in weights:  # series with none of the split labels
        groups.append(",".join(f'{n}=""' for n in split_labels))
    return groups
