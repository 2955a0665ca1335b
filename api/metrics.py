"""Request counts and latency histograms in the Prometheus text format, written by hand.

``prometheus_client`` is not a dependency, and two metric families do not need it. Labels are the route
*template* (``/v1/workloads/{workload_id}/cost``), never the raw path, so ids cannot blow up the series
count; requests that match no route are counted under ``route="(unmatched)"``.

``/metrics`` needs no token by default (Prometheus scrapes it on the cluster network; it holds no tenant
data); ``api.metrics_require_auth: true`` limits it to platform admins.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Metrics", "MetricsMiddleware", "BUCKETS", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_UNMATCHED = "(unmatched)"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """Thread-safe counters and histograms of one app."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, str], int] = defaultdict(int)
        # (method, route) -> [bucket counts..., +Inf count], sum
        self._buckets: dict[tuple[str, str], list[int]] = {}
        self._sums: dict[tuple[str, str], float] = defaultdict(float)
        self._in_flight = 0

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route)
        with self._lock:
            self._requests[(method, route, str(status))] += 1
            counts = self._buckets.setdefault(key, [0] * (len(BUCKETS) + 1))
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    counts[i] += 1
            counts[-1] += 1
            self._sums[key] += seconds

    def in_flight(self, delta: int) -> None:
        with self._lock:
            self._in_flight += delta

    def render(self) -> str:
        """The exposition text (format 0.0.4)."""
        out = [
            "# HELP gpufinops_api_requests_total HTTP requests by method, route template and status code.",
            "# TYPE gpufinops_api_requests_total counter",
        ]
        with self._lock:
            for (method, route, status), n in sorted(self._requests.items()):
                out.append(
                    f'gpufinops_api_requests_total{{method="{method}",route="{_escape(route)}",'
                    f'status="{status}"}} {n}'
                )
            out += [
                "# HELP gpufinops_api_request_duration_seconds Time to answer a request, by route template.",
                "# TYPE gpufinops_api_request_duration_seconds histogram",
            ]
            for (method, route), counts in sorted(self._buckets.items()):
                labels = f'method="{method}",route="{_escape(route)}"'
                for bound, n in zip(BUCKETS, counts, strict=False):
                    out.append(f'gpufinops_api_request_duration_seconds_bucket{{{labels},le="{bound}"}} {n}')
                out.append(f'gpufinops_api_request_duration_seconds_bucket{{{labels},le="+Inf"}} {counts[-1]}')
                out.append(f"gpufinops_api_request_duration_seconds_sum{{{labels}}} {self._sums[(method, route)]:.6f}")
                out.append(f"gpufinops_api_request_duration_seconds_count{{{labels}}} {counts[-1]}")
            out += [
                "# HELP gpufinops_api_requests_in_flight Requests being answered now.",
                "# TYPE gpufinops_api_requests_in_flight gauge",
                f"gpufinops_api_requests_in_flight {self._in_flight}",
            ]
        return "\n".join(out) + "\n"


class MetricsMiddleware:
    """Pure ASGI middleware: times every HTTP request and records it under its route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        self.metrics.in_flight(1)
        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self.metrics.in_flight(-1)
            route = scope.get("route")
            template = getattr(route, "path", None) or _UNMATCHED
            self.metrics.observe(scope["method"], template, status, time.perf_counter() - start)
