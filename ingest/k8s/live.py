"""Live snapshots from the Kubernetes API with the official ``kubernetes`` client.

Lists are paginated (``limit`` / ``continue``); an expired continue token (410 Gone) restarts that
list from the beginning, so a snapshot never mixes two versions of a list; 429 and 5xx responses,
timeouts and dropped connections are retried with exponential backoff (a ``Retry-After`` header
wins); 401 and 403 stop at once with a message that says which credential or RBAC rule is missing.
Responses are read as raw JSON (``call_api``), not deserialised into model classes: it is several
times faster and yields the same dicts as a ``kubectl -o json`` dump, so both paths share one mapping.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from gpufinops.errors import ConfigError, TerminalError, TransientError
from ingest.k8s.settings import K8sSettings, OwnerResource
from ingest.k8s.snapshot import Snapshot, land_snapshot
from ingest.lake import LakeWriter, RunRecord

__all__ = [
    "CORE_TARGETS",
    "ApiLister",
    "ListTarget",
    "api_client_from",
    "ingest_once",
    "list_targets",
    "run_live",
    "take_snapshot",
]

log = logging.getLogger("gpufinops.ingest.k8s")

RBAC_FILE = "deploy/base/rbac.yaml"
_RETRY_AFTER_CAP_S = 300.0  # a server asking for more than this is misconfigured; do not hang


@dataclass(frozen=True)
class ListTarget:
    """One cluster-wide list: ``GET path?limit=..&continue=..``."""

    kind: str
    path: str
    resource: str  # as RBAC names it: "pods", "replicasets.apps"
    required: bool = True


# Pods first: owners listed after the pods include every owner those pods still have.
CORE_TARGETS: tuple[ListTarget, ...] = (
    ListTarget("Pod", "/api/v1/pods", "pods"),
    ListTarget("Node", "/api/v1/nodes", "nodes"),
    ListTarget("Namespace", "/api/v1/namespaces", "namespaces"),
)


def _owner_target(r: OwnerResource) -> ListTarget:
    prefix = f"/apis/{r.group}/{r.version}" if r.group else f"/api/{r.version}"
    return ListTarget(r.kind, f"{prefix}/{r.plural}", r.resource, r.required)


def list_targets(settings: K8sSettings) -> list[ListTarget]:
    return list(CORE_TARGETS) + [_owner_target(r) for r in settings.owner_resources]


class _Gone(Exception):
    """410: the continue token expired; the list must start again."""


class _NotServed(Exception):
    """404 on a list: the API group/resource is not installed (an optional CRD)."""


class _Forbidden(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def api_client_from(settings: K8sSettings) -> k8s_client.ApiClient:
    """kubeconfig (``--kubeconfig`` / ``$KUBECONFIG`` / ``~/.kube/config``) or the in-cluster service account."""
    cfg = k8s_client.Configuration()
    in_cluster = settings.in_cluster
    if in_cluster is None:
        in_cluster = settings.kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    try:
        if in_cluster:
            k8s_config.load_incluster_config(client_configuration=cfg)
        else:
            k8s_config.load_kube_config(
                config_file=str(settings.kubeconfig) if settings.kubeconfig else None,
                context=settings.context,
                client_configuration=cfg,
                persist_config=False,  # never rewrite the user's kubeconfig
            )
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        where = "in-cluster service account" if in_cluster else f"kubeconfig {settings.kubeconfig or '(default)'}"
        ctx = f", context {settings.context!r}" if settings.context else ""
        raise ConfigError(f"cannot load Kubernetes credentials from {where}{ctx}: {exc}") from exc
    cfg.retries = False  # our own retry loop counts attempts and honours Retry-After
    return k8s_client.ApiClient(cfg)


class ApiLister:
    """Lists whole collections through one ``ApiClient``; ``sleep`` is injectable for tests."""

    def __init__(
        self,
        api: k8s_client.ApiClient,
        settings: K8sSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.api = api
        self.settings = settings
        self.sleep = sleep
        self.requests = 0  # for the caller's log line

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    def list_all(self, target: ListTarget) -> list[dict[str, Any]]:
        restarts = 0
        while True:
            try:
                return list(self._pages(target))
            except _Gone:
                restarts += 1
                if restarts > self.settings.max_list_restarts:
                    raise TransientError(
                        f"listing {target.resource}: the continue token expired (410 Gone) {restarts} times in a "
                        "row; the list changes faster than it can be paged - raise page_size"
                    ) from None
                log.warning("listing %s: continue token expired (410 Gone); restarting the list", target.resource)

    def _pages(self, target: ListTarget) -> Iterator[dict[str, Any]]:
        token: str | None = None
        page = 0
        while True:
            page += 1
            doc = self._get(target, token, page)
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise TransientError(f"listing {target.resource}: page {page} has no items array")
            yield from items
            token = (doc.get("metadata") or {}).get("continue") or None
            if not token:
                return

    def _get(self, target: ListTarget, token: str | None, page: int) -> dict[str, Any]:
        query: list[tuple[str, Any]] = [("limit", self.settings.page_size)]
        if token:
            query.append(("continue", token))
        last = ""
        for attempt in range(1, self.settings.max_attempts + 1):
            delay = self._backoff(attempt)
            try:
                status, headers, body = self._request(target.path, query)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if 200 <= status < 300:
                    try:
                        doc = json.loads(body)
                    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                        last = f"page {page} is not JSON: {exc}"
                    else:
                        if isinstance(doc, dict):
                            return doc
                        last = f"page {page} is not a JSON object"
                elif status == 410:
                    raise _Gone()
                elif status == 404 and not target.required:
                    raise _NotServed()
                elif status in (401, 403):
                    raise self._auth_error(target, status, body)
                elif status == 429 or status >= 500:
                    last = f"HTTP {status}: {_status_message(body)}"
                    delay = _retry_after(headers.get("Retry-After"), default=delay)
                else:
                    raise TerminalError(
                        f"listing {target.resource} at {self.host}{target.path}: HTTP {status}: {_status_message(body)}"
                    )
            if attempt == self.settings.max_attempts:
                break
            log.info("listing %s: %s; retry %d in %.2fs", target.resource, last, attempt, delay)
            self.sleep(delay)
        raise TransientError(
            f"listing {target.resource} at {self.host}: gave up after {self.settings.max_attempts} attempts; last error: {last}"
        )

    def _request(self, path: str, query: list[tuple[str, Any]]) -> tuple[int, Any, bytes]:
        method, url, headers, body, post = self.api.param_serialize(
            "GET", path, query_params=query, header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        self.requests += 1
        resp = self.api.call_api(
            method, url, header_params=headers,
            _request_timeout=(self.settings.connect_timeout_s, self.settings.read_timeout_s),
        )
        data = resp.read()
        return resp.status, resp.headers, data or b""

    def _backoff(self, attempt: int) -> float:
        s = self.settings
        return float(min(s.backoff_max_s, s.backoff_base_s * (2 ** (attempt - 1))))

    def _auth_error(self, target: ListTarget, status: int, body: bytes) -> Exception:
        detail = _status_message(body)
        if status == 401:
            return TerminalError(
                f"unauthorized (401) listing {target.resource} at {self.host}: the API server rejected the "
                f"ingester's credentials; check the kubeconfig user / context or the service-account token ({detail})"
            )
        message = (
            f'forbidden: the ingester needs "list" on "{target.resource}" (cluster-wide); grant it in {RBAC_FILE} '
            f"(server said: {detail})"
        )
        if not target.required:
            return _Forbidden(message)
        return TerminalError(message)


def _status_message(body: bytes) -> str:
    """The ``message`` of a ``Status`` object, else the start of the body."""
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and doc.get("message"):
            return str(doc["message"])
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError):
        pass
    text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray) else str(body)
    return text.strip()[:200] or "(empty body)"


def _retry_after(value: str | None, *, default: float) -> float:
    """Seconds from ``Retry-After`` (delta-seconds or an HTTP date), else ``default``."""
    if not value:
        return default
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return default
        seconds = (when - datetime.now(UTC)).total_seconds()
    return float(min(max(seconds, 0.0), _RETRY_AFTER_CAP_S))


def take_snapshot(
    lister: ApiLister,
    targets: list[ListTarget],
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Snapshot:
    """List every target once; the snapshot time is when the listing began."""
    snap = Snapshot(taken_at=now(), origin=f"API server {lister.host}")
    for target in targets:
        try:
            items = lister.list_all(target)
        except _NotServed:
            log.info("%s is not served by this cluster (CRD not installed); owners of that kind stay unresolved",
                     target.resource)
            continue
        except _Forbidden as exc:
            log.warning("%s; owners of kind %s stay unresolved", exc.message, target.kind)
            continue
        for i, obj in enumerate(items):
            if isinstance(obj, dict):
                snap.add(target.kind, obj, f"{target.resource} item {i}")
    return snap


def run_live(
    lister: ApiLister,
    targets: list[ListTarget],
    writer: LakeWriter,
    cluster: str,
    *,
    every_s: float | None = None,
    iterations: int | None = None,
    on_snapshot: Callable[[Snapshot, RunRecord], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """One snapshot, or one every ``every_s`` until ``iterations`` (None: until interrupted).

    In loop mode a transient failure (API down, retries exhausted) costs that snapshot only and is
    logged; the warehouse reports the gap. Terminal errors (RBAC, credentials) stop the loop.
    Returns the number of snapshots landed.
    """
    if every_s is not None and every_s < 1:
        raise ConfigError("--every must be at least 1s (snapshots are landed per second)")
    landed = 0
    done = 0
    next_tick = clock()
    while iterations is None or done < iterations:
        try:
            snap = take_snapshot(lister, targets, now=now)
            record = land_snapshot(writer, cluster, snap)
            landed += 1
            if on_snapshot is not None:
                on_snapshot(snap, record)
        except TransientError as exc:
            if every_s is None:
                raise
            log.error("snapshot of cluster %s failed, will retry next interval: %s", cluster, exc)
        done += 1
        if every_s is None or (iterations is not None and done >= iterations):
            break
        next_tick += every_s
        behind = clock() - next_tick
        if behind > 0:
            # Slower than the interval: skip the missed ticks instead of snapshotting back to back.
            skipped = int(behind // every_s) + 1
            log.warning("snapshot took longer than the %.0fs interval; skipping %d tick(s)", every_s, skipped)
            next_tick += skipped * every_s
        sleep(max(0.0, next_tick - clock()))
    return landed


def ingest_once(writer: LakeWriter, cluster: str, settings: K8sSettings) -> tuple[Snapshot, RunRecord]:
    """One live snapshot landed: the building block for a scheduler (``gpufinops ingest all --once``)."""
    lister = ApiLister(api_client_from(settings), settings)
    snap = take_snapshot(lister, list_targets(settings))
    return snap, land_snapshot(writer, cluster, snap)
