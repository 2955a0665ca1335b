"""Recommendation strategies: importing this package registers every built-in strategy."""

from recommender.strategies import consolidate, cpu_mem, gpu_rightsize, reclaim_idle, spot  # noqa: F401
from recommender.strategies.base import STRATEGIES, Strategy, StrategySettings, build_strategies, register

__all__ = ["STRATEGIES", "Strategy", "StrategySettings", "build_strategies", "register"]
