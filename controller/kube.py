"""The controller's only door to the API server: GET, list, PATCH (server-side dry-run or real), Eviction.

Built on the ``kubernetes`` package's ``ApiClient`` with the same credential loading as the live
ingester (kubeconfig / context / in-cluster). Responses are read as raw JSON. Reads are retried on
429 / 5xx / dropped connections with exponential backoff (``Retry-After`` wins); writes are retried
only on 429 (the server did nothing), so a 5xx or 422 on a write surfaces at once and the executor
rolls back. An eviction refused with 429 (a PodDisruptionBudget allows no disruption now) is retried
after ``Retry-After`` until ``eviction_max_attempts`` / ``eviction_max_wait_s``, then gives up with
a message naming the budget.

Custom objects (Kubeflow Notebook / PyTorchJob, RayJob, KServe InferenceService; ``controller.crds``)
go through ``kubernetes.client.CustomObjectsApi`` (``get_namespaced_custom_object`` /
``patch_namespaced_custom_object`` with ``dry_run="All"`` and the patch's explicit content type:
merge or JSON patch, a CR has no strategic merge), read raw, with the same retries and errors.
"""

from __future__ import annotations

import email.utils
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from gpufinops.errors import TerminalError, TransientError

__all__ = [
    "CONTENT_TYPES",
    "EvictionBlocked",
    "KubeClient",
    "KubeError",
    "KubeNotFound",
    "KubeSettings",
    "KubeUnavailable",
    "client_from",
]

log = logging.getLogger("gpufinops.controller.kube")

CONTENT_TYPES = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}
_RETRY_AFTER_CAP_S = 300.0
_CUSTOM_PATH = re.compile(r"^/apis/(?P<group>[^/]+\.[^/]+)/(?P<version>[^/]+)/namespaces/(?P<namespace>[^/]+)/"
                          r"(?P<plural>[^/]+)/(?P<name>[^/]+)$")
_CUSTOM_GROUPS = frozenset({"kubeflow.org", "ray.io", "serving.kserve.io"})


class KubeError(TerminalError):
    """The API server refused a request; ``status`` is the HTTP code, ``reason`` the Status reason."""

    def __init__(self, message: str, *, status: int = 0, reason: str = ""):
        super().__init__(message)
        self.status = status
        self.reason = reason


class KubeNotFound(KubeError):
    """404: the object does not exist (any more)."""


class EvictionBlocked(KubeError):
    """Evictions kept being refused (429: a PodDisruptionBudget) past the bound."""


class KubeUnavailable(TransientError):
    """The API server did not answer usefully after the retries (5xx, timeouts, refused connections)."""


@dataclass(frozen=True)
class KubeSettings:
    max_attempts: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    eviction_max_attempts: int = 10
    eviction_max_wait_s: float = 600.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    page_size: int = 500


def client_from(kubeconfig: Path | None = None, context: str | None = None, *,
                in_cluster: bool | None = None, settings: KubeSettings | None = None) -> KubeClient:
    """A client from a kubeconfig (+ context), else ``$KUBECONFIG`` / ``~/.kube/config``, else in-cluster."""
    from ingest.k8s.live import api_client_from
    from ingest.k8s.settings import K8sSettings

    api = api_client_from(K8sSettings(kubeconfig=kubeconfig, context=context, in_cluster=in_cluster))
    return KubeClient(api, settings=settings)


def _message(body: bytes) -> tuple[str, str, list[dict[str, Any]]]:
    """(message, reason, causes) of a ``Status`` body, else the start of the body."""
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and doc.get("message"):
            causes = (doc.get("details") or {}).get("causes") or []
            return str(doc["message"]), str(doc.get("reason") or ""), [c for c in causes if isinstance(c, dict)]
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError):
        pass
    text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray) else str(body)
    return text.strip()[:200] or "(empty body)", "", []


def _retry_after(value: str | None, default: float) -> float:
    if not value:
        return default
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            seconds = (email.utils.parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return default
    return float(min(max(seconds, 0.0), _RETRY_AFTER_CAP_S))


class KubeClient:
    """Raw-JSON requests through one ``ApiClient``; ``sleep`` is injectable so tests do not wait."""

    def __init__(self, api: k8s_client.ApiClient, *, settings: KubeSettings | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.api = api
        self.settings = settings or KubeSettings()
        self.sleep = sleep

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    # -- reads --------------------------------------------------------------------------------------
    def get(self, path: str) -> dict[str, Any]:
        return self._json(self._call("GET", path, what=f"reading {path}"), path)

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return self.get(path)
        except KubeNotFound:
            return None

    def list_all(self, path: str, *, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query: list[tuple[str, Any]] = [("limit", self.settings.page_size)]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if token:
                query.append(("continue", token))
            doc = self._json(self._call("GET", path, query=query, what=f"listing {path}"), path)
            items.extend(i for i in doc.get("items") or [] if isinstance(i, dict))
            token = (doc.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.list_all("/api/v1/nodes", label_selector=label_selector)

    def pods_on_node(self, node: str) -> list[dict[str, Any]]:
        return self.list_all("/api/v1/pods", field_selector=f"spec.nodeName={node}")

    def pdbs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets" if namespace \
            else "/apis/policy/v1/poddisruptionbudgets"
        return self.list_all(path)

    # -- writes -------------------------------------------------------------------------------------
    def patch(self, path: str, body: Any, patch_type: str, *, dry_run: bool = False) -> dict[str, Any]:
        if patch_type not in CONTENT_TYPES:
            raise KubeError(f"unknown patch type {patch_type!r} for {path}")
        query = [("dryRun", "All")] if dry_run else []
        what = f"{'server-side dry-run of ' if dry_run else ''}PATCH {path}"
        return self._json(self._call("PATCH", path, query=query, body=body, write=True, what=what,
                                     content_type=CONTENT_TYPES[patch_type]), path)

    def evict(self, namespace: str, pod: str, *, dry_run: bool = False) -> dict[str, Any]:
        """POST a policy/v1 Eviction; 429 (PDB) is retried after Retry-After up to the bound."""
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction"
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
        query = [("dryRun", "All")] if dry_run else []
        s = self.settings
        waited = 0.0
        for attempt in range(1, s.eviction_max_attempts + 1):
            status, headers, data = self._send("POST", path, query, body, "application/json")
            if status != 429:
                if 200 <= status < 300:
                    return self._json(data, path)
                raise self._error(status, data, f"evicting pod {namespace}/{pod}")
            message, _, causes = _message(data)
            delay = _retry_after(headers.get("Retry-After"), self._backoff(attempt))
            if attempt == s.eviction_max_attempts or waited + delay > s.eviction_max_wait_s:
                budget = "; ".join(c.get("message", "") for c in causes if c.get("message")) or message
                raise EvictionBlocked(
                    f"gave up evicting pod {namespace}/{pod} after {attempt} attempt(s) over {waited:.0f}s: the API "
                    f"server keeps answering 429 ({budget}); its PodDisruptionBudget allows no disruption now - "
                    "wait for the workload to become healthy or relax the budget, then apply again",
                    status=429, reason="TooManyRequests")
            log.info("evicting %s/%s: 429 (%s); retry %d in %.1fs", namespace, pod, message, attempt, delay)
            self.sleep(delay)
            waited += delay
        raise AssertionError("unreachable")  # pragma: no cover

    # -- plumbing -----------------------------------------------------------------------------------
    def _backoff(self, attempt: int) -> float:
        s = self.settings
        return float(min(s.backoff_max_s, s.backoff_base_s * (2 ** (attempt - 1))))

    def _call(self, method: str, path: str, *, query: list[tuple[str, Any]] | None = None, body: Any = None,
              write: bool = False, what: str, content_type: str = "application/json") -> bytes:
        last = ""
        for attempt in range(1, self.settings.max_attempts + 1):
            delay = self._backoff(attempt)
            try:
                status, headers, data = self._send(method, path, query or [], body, content_type)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if write:  # the request may or may not have arrived: surface it, the executor rolls back
                    raise KubeUnavailable(f"{what} at {self.host}: {type(exc).__name__}: {exc}") from exc
                last = f"{type(exc).__name__}: {exc}"
            else:
                if 200 <= status < 300:
                    return data
                retryable = status == 429 or (status >= 500 and not write)
                if not retryable:
                    raise self._error(status, data, what)
                last = f"HTTP {status}: {_message(data)[0]}"
                delay = _retry_after(headers.get("Retry-After"), delay)
            if attempt == self.settings.max_attempts:
                break
            log.info("%s: %s; retry %d in %.2fs", what, last, attempt, delay)
            self.sleep(delay)
        raise KubeUnavailable(f"{what} at {self.host}: gave up after {self.settings.max_attempts} attempts; "
                              f"last error: {last}")

    def _send(self, method: str, path: str, query: list[tuple[str, Any]], body: Any,
              content_type: str) -> tuple[int, Any, bytes]:
        cr = _CUSTOM_PATH.match(path)
        if cr and cr["group"] in _CUSTOM_GROUPS and method in ("GET", "PATCH"):
            return self._send_custom(method, cr.groupdict(), query, body, content_type)
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        m, url, hdrs, data, _ = self.api.param_serialize(method, path, query_params=query, header_params=headers,
                                                         body=body, auth_settings=["BearerToken"])
        resp = self.api.call_api(m, url, header_params=hdrs, body=data,
                                 _request_timeout=(self.settings.connect_timeout_s, self.settings.read_timeout_s))
        raw = resp.read()
        return resp.status, resp.headers, raw or b""

    def _send_custom(self, method: str, where: dict[str, str], query: list[tuple[str, Any]], body: Any,
                     content_type: str) -> tuple[int, Any, bytes]:
        """A namespaced custom object through ``CustomObjectsApi``, the raw response (or error) kept."""
        api = k8s_client.CustomObjectsApi(self.api)
        timeout = (self.settings.connect_timeout_s, self.settings.read_timeout_s)
        args = (where["group"], where["version"], where["namespace"], where["plural"], where["name"])
        resp: Any
        try:
            if method == "GET":
                resp = api.get_namespaced_custom_object(*args, _preload_content=False, _request_timeout=timeout)
            else:
                dry_run = "All" if ("dryRun", "All") in query else None
                resp = api.patch_namespaced_custom_object(*args, body=body, dry_run=dry_run,
                                                          _content_type=content_type, _preload_content=False,
                                                          _request_timeout=timeout)
        except ApiException as exc:
            raw = exc.body.encode() if isinstance(exc.body, str) else (exc.body or b"")
            return int(exc.status or 0), exc.headers or {}, raw
        return int(resp.status), resp.headers, resp.data or b""

    def _error(self, status: int, data: bytes, what: str) -> KubeError:
        message, reason, _ = _message(data)
        text = f"{what}: HTTP {status}{f' {reason}' if reason else ''}: {message}"
        if status == 404:
            return KubeNotFound(text, status=status, reason=reason)
        if status == 403:
            text += " (the controller's service account lacks this RBAC verb; see docs/controller.md)"
        return KubeError(text, status=status, reason=reason)

    @staticmethod
    def _json(data: bytes, path: str) -> dict[str, Any]:
        try:
            doc = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise KubeError(f"{path}: the response is not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise KubeError(f"{path}: the response is not a JSON object")
        return doc
