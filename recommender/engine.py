"""One recommender run: load the input, run the strategies (plan), write the findings (apply)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError

from gpufinops.errors import ConfigError
from gpufinops.settings import Settings
from recommender.loader import LoaderSettings, load_input
from recommender.model import Recommendation, RecommenderInput
from recommender.store import RecommendationStore
from recommender.strategies import build_strategies

__all__ = ["RecommenderConfig", "RunSummary", "config_from_settings", "plan", "run"]

log = logging.getLogger("gpufinops.recommender")


class RecommenderConfig(BaseModel):
    """The ``recommender:`` section of the YAML config file."""

    loader: LoaderSettings = Field(default_factory=lambda: LoaderSettings())
    strategies: dict[str, dict[str, Any]] = Field(default_factory=dict)


def config_from_settings(settings: Settings) -> RecommenderConfig:
    """Read ``recommender:`` from the config file the settings were built from (if any)."""
    path = settings.config
    if not path or not Path(path).is_file():
        return RecommenderConfig()
    data = yaml.safe_load(Path(path).read_text()) or {}
    try:
        return RecommenderConfig(**(data.get("recommender") or {}))
    except ValidationError as exc:
        raise ConfigError(f"invalid `recommender` section in {path}: {exc}") from exc


@dataclass
class RunSummary:
    recommendations: list[Recommendation]
    written: dict[str, int] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)
    window: tuple[datetime, datetime] | None = None

    def by_kind(self) -> dict[str, tuple[int, float]]:
        out: dict[str, tuple[int, float]] = {}
        for r in self.recommendations:
            n, s = out.get(r.kind, (0, 0.0))
            out[r.kind] = (n + 1, s + r.est_monthly_savings_usd)
        return out


def plan(data: RecommenderInput, config: RecommenderConfig | None = None, only: list[str] | None = None,
         timings: dict[str, float] | None = None) -> list[Recommendation]:
    """Pure: every enabled strategy over the input, best savings first."""
    config = config or RecommenderConfig()
    recs: list[Recommendation] = []
    for strategy in build_strategies(config.strategies, only):
        t0 = time.perf_counter()
        recs.extend(strategy.run(data))
        if timings is not None:
            timings[strategy.name] = round(time.perf_counter() - t0, 3)
    return sorted(recs, key=lambda r: (-r.est_monthly_savings_usd, r.id))


def run(settings: Settings, config: RecommenderConfig | None = None, *, only: list[str] | None = None,
        dry_run: bool = False, now: datetime | None = None, store: RecommendationStore | None = None) -> RunSummary:
    config = config or config_from_settings(settings)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    data = load_input(settings, config.loader, now=now)
    timings["load"] = round(time.perf_counter() - t0, 3)
    recs = plan(data, config, only, timings)
    summary = RunSummary(recs, timings_s=timings, window=(data.window_start, data.window_end))
    if dry_run:
        return summary
    store = store or RecommendationStore(settings.effective_app_db_url)
    clusters = {s.cluster for s in data.snapshots} | {w.cluster for w in data.gpu_usage} | {
        c.cluster for c in data.container_usage}
    kinds = {k for s in build_strategies(config.strategies, only) if s.settings.enabled for k in s.kinds}
    t1 = time.perf_counter()
    summary.written = dict(store.upsert(recs, scope={(k, c) for k in kinds for c in clusters}, now=data.now))
    timings["store"] = round(time.perf_counter() - t1, 3)
    return summary
