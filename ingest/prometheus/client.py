"""A small Prometheus HTTP API client: ``query`` and ``query_range`` with retries and clear errors.

Plain httpx rather than prometheus-api-client, because the ingest needs control over what is
retried (timeouts, 429, 5xx -> :class:`TransientError` after backoff) and what is terminal (a 4xx
bad query -> :class:`InputError` naming the query), and needs to count requests for the split logic.
Queries go out as POST forms so that long series matchers never hit a URL length limit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from gpufinops.errors import InputError, TransientError

__all__ = ["PromClient", "RequestLog"]

_log = logging.getLogger("gpufinops.ingest.prometheus")
_RETRY_STATUS = {429, 500, 502, 503, 504}


@dataclass
class RequestLog:
    """What the client sent: one entry per successful request (path, query, start, end, step)."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    retries: int = 0

    @property
    def count(self) -> int:
        return len(self.entries)


class PromClient:
    """Talks to one Prometheus-compatible endpoint (Prometheus, Thanos Query, Mimir)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 4,
        backoff_s: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        compress: bool = False,
    ):
        # Uncompressed by default: gzip made Prometheus spend ~4x the CPU on a 288 k-point answer
        # (1.3 s vs 0.35 s here) to save bandwidth a cluster-local link does not need.
        headers = {"Accept": "application/json", "Accept-Encoding": "gzip" if compress else "identity"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.log = RequestLog()
        self._sleep = sleep
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PromClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public ---------------------------------------------------------------------------------
    def query(self, promql: str, at: datetime) -> list[dict[str, Any]]:
        """Instant query; returns the ``result`` list of a vector."""
        data = self._post("/api/v1/query", {"query": promql, "time": _ts(at)}, promql)
        return data.get("result", [])

    def query_range(self, promql: str, start: datetime, end: datetime, step_s: float) -> list[dict[str, Any]]:
        """Range query over the closed interval ``[start, end]``; returns the ``result`` matrix."""
        form = {"query": promql, "start": _ts(start), "end": _ts(end), "step": _num(step_s)}
        data = self._post("/api/v1/query_range", form, promql)
        return data.get("result", [])

    def series(self, selectors: list[str], start: datetime, end: datetime) -> list[dict[str, str]]:
        """Label sets of the series matching any selector in ``[start, end]``; reads only the index."""
        form: dict[str, Any] = {"match[]": list(selectors), "start": _ts(start), "end": _ts(end)}
        data = self._post("/api/v1/series", form, " or ".join(selectors))
        return data if isinstance(data, list) else []

    # -- internals ------------------------------------------------------------------------------
    def _post(self, path: str, form: dict[str, Any], promql: str) -> Any:
        attempt = 0
        while True:
            try:
                resp = self._http.post(path, data=form)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code in _RETRY_STATUS:
                    problem = f"HTTP {resp.status_code}: {_error_text(resp)}"
                elif resp.status_code >= 400:
                    # 400 bad_data / 422 execution errors: a retry would fail the same way.
                    raise InputError(
                        f"Prometheus at {self.url} rejected query {promql!r} "
                        f"(HTTP {resp.status_code}): {_error_text(resp)}"
                    )
                else:
                    body = _json(resp, promql, self.url)
                    self.log.entries.append({"path": path, **form})
                    return body.get("data", {})
            attempt += 1
            if attempt > self.retries:
                raise TransientError(
                    f"Prometheus at {self.url} failed {attempt} times for query {promql!r}; last: {problem}"
                )
            self.log.retries += 1
            delay = self.backoff_s * (2 ** (attempt - 1))
            _log.warning("prometheus %s (attempt %d/%d), retrying in %.1fs", problem, attempt, self.retries, delay)
            self._sleep(delay)


def _json(resp: httpx.Response, promql: str, url: str) -> dict[str, Any]:
    try:
        body = resp.json()
    except ValueError as exc:
        raise TransientError(f"Prometheus at {url} returned non-JSON for query {promql!r}: {resp.text[:200]!r}") from exc
    if body.get("status") != "success":
        raise InputError(f"Prometheus at {url} failed query {promql!r}: {body.get('errorType')}: {body.get('error')}")
    return body


def _error_text(resp: httpx.Response) -> str:
    try:
        body = resp.json()
        return f"{body.get('errorType', '')}: {body.get('error', '')}".strip(": ")
    except ValueError:
        return resp.text[:200]


def _ts(t: datetime) -> str:
    return _num(t.timestamp())


def _num(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")
