"""The registry of metric loaders: one small typed class per PromQL query, grouped by source.

A loader knows the landing column it fills, the PromQL that fetches it (with room for extra label
matchers, which is how a request is split by series), the raw selector a ``count by`` pre-query
sizes it with, and the raw metric name an exposition file carries it under. A *source*
(``dcgm``, ``usage``) is a landing table, its loaders, the label map that turns a series into
the table's identity columns, and the labels a fleet is split by.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from gpufinops.errors import ConfigError
from ingest.prometheus.labels import (
    DCGM_IDENTITY,
    SERVING_IDENTITY,
    USAGE_IDENTITY,
    DcgmLabelMap,
    ServingLabelMap,
    UsageLabelMap,
)

__all__ = [
    "MetricLoader",
    "DcgmGauge",
    "GrEngineActive",
    "GpuUtil",
    "FbUsed",
    "FbFree",
    "PowerUsage",
    "TensorActive",
    "CpuCores",
    "MemoryWorkingSet",
    "UsageSettings",
    "ServingSettings",
    "ServingRequests",
    "ServingPromptTokens",
    "ServingGenerationTokens",
    "LOADERS",
    "register_loader",
    "SourceSpec",
    "SOURCES",
    "get_source",
    "join_matchers",
]


def join_matchers(*parts: str) -> str:
    return ",".join(p for p in parts if p)


class MetricLoader:
    """One query. Subclasses set the class variables and may override :meth:`promql`."""

    name: ClassVar[str]
    source: ClassVar[str]
    column: ClassVar[str]
    metric: ClassVar[str]
    base_matchers: ClassVar[tuple[str, ...]] = ("",)  # one selector per matcher set, OR-ed together

    def selectors(self, matchers: str = "") -> list[str]:
        out = []
        for base in self.base_matchers:
            inner = join_matchers(base, matchers)
            out.append(f"{self.metric}{{{inner}}}" if inner else self.metric)
        return out

    def promql(self, matchers: str = "", *, step_s: float = 60.0) -> str:
        # last_over_time(x[step]) instead of a bare selector: a grid point only gets a value when a
        # sample falls inside its step, so a series that stopped is not extended by the 5-minute
        # lookback of an instant vector (back-filled or crashed targets leave no staleness marker).
        return " or ".join(f"last_over_time({s}[{_window(step_s)}])" for s in self.selectors(matchers))

    def count_selector(self, matchers: str = "") -> list[str]:
        """Raw selectors whose series bound the number of series :meth:`promql` returns."""
        return self.selectors(matchers)


LOADERS: dict[str, type[MetricLoader]] = {}


def register_loader(cls: type[MetricLoader]) -> type[MetricLoader]:
    if cls.name in LOADERS:
        raise ValueError(f"metric loader {cls.name!r} is registered twice")
    LOADERS[cls.name] = cls
    return cls


class DcgmGauge(MetricLoader):
    source = "dcgm"


@register_loader
class GrEngineActive(DcgmGauge):
    name, column, metric = "gr_engine_active", "gr_engine_active", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


@register_loader
class GpuUtil(DcgmGauge):
    name, column, metric = "gpu_util", "gpu_util", "DCGM_FI_DEV_GPU_UTIL"


@register_loader
class FbUsed(DcgmGauge):
    name, column, metric = "fb_used", "fb_used_mib", "DCGM_FI_DEV_FB_USED"


@register_loader
class FbFree(DcgmGauge):
    name, column, metric = "fb_free", "fb_free_mib", "DCGM_FI_DEV_FB_FREE"


@register_loader
class PowerUsage(DcgmGauge):
    name, column, metric = "power", "power_w", "DCGM_FI_DEV_POWER_USAGE"


@register_loader
class TensorActive(DcgmGauge):
    name, column, metric = "tensor_active", "tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"


@dataclass(frozen=True)
class UsageSettings:
    """Typed settings of the cAdvisor loaders."""

    rate_window: str = "5m"


# Both cAdvisor generations: ``container`` (Kubernetes >= 1.16) and ``container_name`` (older).
_CADVISOR_MATCHERS = ('container!="",container!="POD"', 'container_name!="",container_name!="POD"')
_BY = "namespace,pod,container,pod_name,container_name"


class _UsageLoader(MetricLoader):
    source = "usage"
    base_matchers = _CADVISOR_MATCHERS
    settings: UsageSettings

    def __init__(self, settings: UsageSettings | None = None):
        self.settings = settings or UsageSettings()


@register_loader
class CpuCores(_UsageLoader):
    name, column, metric = "cpu_cores", "cpu_cores", "container_cpu_usage_seconds_total"

    def promql(self, matchers: str = "", *, step_s: float = 60.0) -> str:
        # sum: a container's restarts leave several cgroup series; their rates add up.
        w = self.settings.rate_window
        return " or ".join(f"sum by ({_BY}) (rate({s}[{w}]))" for s in self.selectors(matchers))


@register_loader
class MemoryWorkingSet(_UsageLoader):
    name, column, metric = "memory_working_set", "memory_working_set_bytes", "container_memory_working_set_bytes"

    def promql(self, matchers: str = "", *, step_s: float = 60.0) -> str:
        # max, not sum: the same container scraped by two jobs must not count twice.
        return " or ".join(
            f"max by ({_BY}) (last_over_time({s}[{_window(step_s)}]))" for s in self.selectors(matchers)
        )


@dataclass(frozen=True)
class ServingSettings:
    """Typed settings of the serving-counter loaders: a PromQL per loader name (``requests``,
    ``prompt_tokens``, ``generation_tokens``) for servers other than vLLM (Triton, TGI, a gateway).

    A custom query must return cumulative counters labelled with ``namespace``, ``pod`` and a model
    label (``model_name``/``model``); ``{matchers}`` in it is replaced by the series group's label
    matchers (e.g. ``namespace=~"a|b"``), so large fleets can still be split.
    """

    promql: Mapping[str, str] = field(default_factory=dict)


_SERVING_BY = "namespace,pod,model_name,exported_namespace,exported_pod"
_RANGE_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*\[")


class _ServingCounter(MetricLoader):
    source = "serving"
    settings: ServingSettings

    def __init__(self, settings: ServingSettings | None = None):
        self.settings = settings or ServingSettings()

    def promql(self, matchers: str = "", *, step_s: float = 60.0) -> str:
        custom = self.settings.promql.get(self.name)
        if custom:
            return custom.replace("{matchers}", matchers)
        # Several series per pod (vLLM labels finished_reason): their counters add up; a server
        # restart resets them all at once, so the sum resets too and increase() stays right.
        return f"sum by ({_SERVING_BY}) ({super().promql(matchers, step_s=step_s)})"

    def count_selector(self, matchers: str = "") -> list[str]:
        custom = self.settings.promql.get(self.name)
        if not custom:
            return self.selectors(matchers)
        # The series a custom query reads: the selectors of its range vectors (name{labels}[...]).
        found = [(m.group(1), (m.group(2) or "{}")[1:-1].replace("{matchers}", "").strip(","))
                 for m in _RANGE_SELECTOR.finditer(custom.replace("{matchers}", ""))]
        if not found:
            raise ConfigError(f"serving_promql.{self.name}: {custom!r} has no range-vector selector "
                              "(name{{labels}}[window]) to size the request with")
        return [f"{name}{{{join_matchers(inner, matchers)}}}" for name, inner in found]


@register_loader
class ServingRequests(_ServingCounter):
    name, column, metric = "requests", "requests_total", "vllm:request_success_total"


@register_loader
class ServingPromptTokens(_ServingCounter):
    name, column, metric = "prompt_tokens", "prompt_tokens_total", "vllm:prompt_tokens_total"


@register_loader
class ServingGenerationTokens(_ServingCounter):
    name, column, metric = "generation_tokens", "generation_tokens_total", "vllm:generation_tokens_total"


@dataclass(frozen=True)
class SourceSpec:
    """A Prometheus-backed source: its landing table, loaders, identity and split labels."""

    name: str
    table: str
    identity_columns: tuple[str, ...]
    identity: Callable[[Mapping[str, str]], tuple]
    split_labels: tuple[str, ...]
    loader_names: tuple[str, ...] = field(default=())

    def loaders(self) -> list[MetricLoader]:
        names = self.loader_names or tuple(n for n, c in LOADERS.items() if c.source == self.name)
        return [LOADERS[n]() for n in names]


SOURCES: dict[str, SourceSpec] = {
    "dcgm": SourceSpec("dcgm", "gpu_samples", DCGM_IDENTITY, DcgmLabelMap().identity, ("Hostname", "hostname")),
    "usage": SourceSpec("usage", "container_usage", USAGE_IDENTITY, UsageLabelMap().identity, ("namespace",)),
    "serving": SourceSpec("serving", "serving_requests", SERVING_IDENTITY, ServingLabelMap().identity, ("namespace",)),
}


def get_source(name: str) -> SourceSpec:
    try:
        return SOURCES[name]
    except KeyError:
        raise KeyError(f"unknown Prometheus source {name!r}; known: {', '.join(SOURCES)}") from None


def _window(step_s: float) -> str:
    # One millisecond short of a step: Prometheus 2.x range selectors include their left edge, so
    # a full step would also see the previous grid point's sample and extend an ended series by one.
    return _dur(step_s - 0.001)


def _dur(seconds: float) -> str:
    ms = int(round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"
