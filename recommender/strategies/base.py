"""The strategy extension point: one small typed class per recommendation kind, in a registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from gpufinops.errors import ConfigError
from recommender.model import Recommendation, RecommenderInput

__all__ = ["StrategySettings", "Strategy", "STRATEGIES", "register", "build_strategies"]


class StrategySettings(BaseModel):
    """Settings every strategy has; subclasses add their own."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # Significance threshold: smaller findings are not written, so runs do not flap.
    min_monthly_savings_usd: float = 1.0


S = TypeVar("S", bound=StrategySettings)


class Strategy(ABC, Generic[S]):
    """Pure: reads a :class:`RecommenderInput`, returns recommendations. No I/O."""

    name: ClassVar[str]
    kinds: ClassVar[tuple[str, ...]]
    settings_model: ClassVar[type[StrategySettings]] = StrategySettings

    def __init__(self, settings: S | dict[str, Any] | None = None):
        if settings is None or isinstance(settings, dict):
            try:
                settings = self.settings_model(**(settings or {}))  # type: ignore[assignment]
            except Exception as exc:  # pydantic ValidationError: name the strategy
                raise ConfigError(f"invalid settings for recommender strategy {self.name!r}: {exc}") from exc
        self.settings: S = settings  # type: ignore[assignment]

    @abstractmethod
    def plan(self, data: RecommenderInput) -> list[Recommendation]: ...

    def run(self, data: RecommenderInput) -> list[Recommendation]:
        if not self.settings.enabled:
            return []
        floor = self.settings.min_monthly_savings_usd
        return [r for r in self.plan(data) if r.est_monthly_savings_usd >= floor]


STRATEGIES: dict[str, type[Strategy[Any]]] = {}


def register(cls: type[Strategy[Any]]) -> type[Strategy[Any]]:
    if cls.name in STRATEGIES:
        raise ValueError(f"strategy {cls.name!r} registered twice")
    STRATEGIES[cls.name] = cls
    return cls


def build_strategies(config: dict[str, dict[str, Any]] | None = None,
                     only: list[str] | None = None) -> list[Strategy[Any]]:
    """Instantiate the registered strategies with their settings (``{name: {setting: value}}``)."""
    config = config or {}
    unknown = (set(config) | set(only or [])) - set(STRATEGIES)
    if unknown:
        raise ConfigError(f"unknown recommender strategies {sorted(unknown)}; known: {sorted(STRATEGIES)}")
    names = only or list(STRATEGIES)
    return [STRATEGIES[n](config.get(n)) for n in names]
