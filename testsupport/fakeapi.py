"""A small Kubernetes API server in memory: real HTTP, the verbs the controller uses, every request recorded.

No kube-apiserver runs in the demo or in the tests, so this stands in for one. The real ``kubernetes``
client (``controller.kube``) talks HTTP to a loopback server that holds Kubernetes objects in memory
and behaves like the API server where the controller depends on it:

- GET objects and lists (``labelSelector`` equality terms, ``fieldSelector=spec.nodeName=...``);
- PATCH with strategic-merge (lists of containers, env, ports, volumes ... merged by their key),
  JSON merge (RFC 7386) and JSON patch (RFC 6902) bodies, chosen by Content-Type;
- ``?dryRun=All`` returns the result and stores nothing; real writes bump ``resourceVersion`` (and
  ``generation`` when the spec changes);
- the result of every write is validated with ``kubernetes-validate`` (strict) and refused with 422
  like admission would; a Job's pod template is immutable (422), as on a real server;
- the custom kinds (Kubeflow ``Notebook`` / ``PyTorchJob``, ``RayJob``, KServe ``InferenceService``) at
  their real paths (``/apis/kubeflow.org/v1/namespaces/NS/notebooks/NAME`` ...): merge and JSON patches
  only (a strategic merge is 415, as for any CR); kubernetes-validate has no schemas for them, so
  ``validate_object`` validates their metadata and every embedded pod template (as a core/v1
  PodTemplate) strictly, plus the types of the fields the controller sets (suspend, replicas);
- POST ``pods/<name>/eviction``: 429 + ``Retry-After`` while a covering PDB allows no disruption, or
  from a scripted sequence; a granted eviction deletes the pod;
- ``fail(...)`` injects an error status for a given request; ``after_write`` hooks mutate what was stored;
- ``requests`` records (method, path, query, body, content type, status) of everything received.

Used by ``gpufinops demo-cluster`` (the demo fleet's objects, ``testsupport.demo_cluster``) and by the
controller tests (``tests/kube_replay.py``: recorded fixtures). It serves no authentication: bind it
to loopback only.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate
from kubernetes import client as k8s_client

from controller.crds import CUSTOM_KINDS, CUSTOM_RESOURCES, RESOURCES, pod_templates

SERVED_KINDS = RESOURCES  # what the server holds

__all__ = ["FakeKubeAPI", "Fault", "PatchError", "Recorded", "SERVED_KINDS", "apply_patch", "iter_objects",
           "object_path", "originals_equal", "validate_object"]

_CONTENT_TYPES = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
}
# patchMergeKey of the list fields the controller touches (from the Kubernetes API types)
_MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
               "ports": "containerPort", "volumes": "name", "volumeMounts": "mountPath",
               "imagePullSecrets": "name", "conditions": "type"}


def object_path(obj: dict[str, Any]) -> str:
    prefix, plural, namespaced = SERVED_KINDS[obj["kind"]]
    meta = obj["metadata"]
    return f"{prefix}/namespaces/{meta['namespace']}/{plural}/{meta['name']}" if namespaced \
        else f"{prefix}/{plural}/{meta['name']}"


class PatchError(Exception):
    """An unappliable patch (the server answers 422)."""


# (pointer parts, expected type(s), minimum) of the custom kinds' own fields the controller writes
_CR_FIELDS: dict[str, list[tuple[tuple[str, ...], type | tuple[type, ...], int | None]]] = {
    "PyTorchJob": [(("spec", "runPolicy", "suspend"), bool, None)],
    "RayJob": [(("spec", "suspend"), bool, None)],
    "InferenceService": [(("spec", "predictor", "minReplicas"), int, 0), (("spec", "predictor", "maxReplicas"), int, 0)],
}


def _check_custom(obj: dict[str, Any], k8s_version: str) -> None:
    kind = obj["kind"]
    meta = obj.get("metadata") or {}
    group, version, _ = CUSTOM_RESOURCES[kind]
    if obj.get("apiVersion") != f"{group}/{version}":
        raise ValueError(f"apiVersion: {obj.get('apiVersion')!r} is not {group}/{version}")
    for path, types, minimum in _CR_FIELDS.get(kind, []):
        cur: Any = obj
        for part in path:
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            continue
        if not isinstance(cur, types) or (types is int and isinstance(cur, bool)):
            raise ValueError(f"{'.'.join(path)}: {cur!r} is not a {getattr(types, '__name__', types)}")
        if minimum is not None and cur < minimum:
            raise ValueError(f"{'.'.join(path)}: {cur!r} is below {minimum}")
    if kind == "InferenceService":
        pred = (obj.get("spec") or {}).get("predictor") or {}
        lo, hi = pred.get("minReplicas"), pred.get("maxReplicas")
        if isinstance(lo, int) and isinstance(hi, int) and hi > 0 and lo > hi:
            raise ValueError(f"spec.predictor: minReplicas {lo} is above maxReplicas {hi}")
    if kind == "PyTorchJob":
        for name, rs in ((obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}).items():
            if name not in ("Master", "Worker") or not isinstance((rs or {}).get("replicas", 1), int):
                raise ValueError(f"spec.pytorchReplicaSpecs.{name}: unknown replica type or replicas not an integer")
    templates = pod_templates(kind, obj)
    if not templates:
        raise ValueError("no pod template")
    for where, template in templates:
        holder = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta, "template": template}
        try:
            kubernetes_validate.validate(holder, k8s_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            at = ".".join(str(p) for p in exc.path)
            at = at.replace("template.", f"{where.removesuffix('.spec')}.", 1) if at.startswith("template.") else at
            raise ValueError(f"{at}: {exc.message}") from None


def validate_object(obj: dict[str, Any], k8s_version: str = "1.30") -> None:
    """Raise ``ValueError`` naming the field when ``obj`` is not valid: built-in kinds with
    kubernetes-validate (strict), custom kinds by their metadata, pod templates and written fields."""
    if obj.get("kind") in CUSTOM_KINDS:
        _check_custom(obj, k8s_version)
        return
    try:
        kubernetes_validate.validate(obj, k8s_version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        raise ValueError(f"{'.'.join(str(p) for p in exc.path)}: {exc.message}") from None


# -- patches ----------------------------------------------------------------------------------------
def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


def _strategic(target: Any, patch: Any, key: str | None = None) -> Any:
    """Strategic merge: like a merge patch, but lists with a patchMergeKey merge item by item."""
    if isinstance(patch, list) and key in _MERGE_KEYS and isinstance(target, list):
        mk = _MERGE_KEYS[key]
        out = [copy.deepcopy(x) for x in target]
        for item in patch:
            if not isinstance(item, dict) or mk not in item:
                raise PatchError(f"strategic merge: an item of {key} lacks its merge key {mk!r}")
            found = [i for i, x in enumerate(out) if isinstance(x, dict) and x.get(mk) == item[mk]]
            if item.get("$patch") == "delete":
                out = [x for i, x in enumerate(out) if i not in found]
            elif found:
                out[found[0]] = _strategic(out[found[0]], item)
            else:
                out.append(_strategic({}, item))
        return out
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = _strategic(merged.get(k), v, k)
    return merged


def _tokens(ptr: str) -> list[str]:
    if ptr == "":
        return []
    if not ptr.startswith("/"):
        raise PatchError(f"JSON pointer {ptr!r} does not start with /")
    return [t.replace("~1", "/").replace("~0", "~") for t in ptr[1:].split("/")]


def _parent(doc: Any, ptr: str) -> tuple[Any, str]:
    toks = _tokens(ptr)
    if not toks:
        raise PatchError("the whole document cannot be patched")
    cur = doc
    for t in toks[:-1]:
        try:
            cur = cur[int(t)] if isinstance(cur, list) else cur[t]
        except (KeyError, IndexError, ValueError, TypeError):
            raise PatchError(f"path {ptr}: {t!r} not found") from None
    return cur, toks[-1]


def _json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 (add, remove, replace, test)."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        kind, ptr = op.get("op"), op.get("path", "")
        parent, last = _parent(doc, ptr)
        if isinstance(parent, list):
            idx = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(idx, copy.deepcopy(op["value"]))
            elif idx >= len(parent):
                raise PatchError(f"path {ptr}: index {idx} out of range")
            elif kind == "remove":
                parent.pop(idx)
            elif kind == "replace":
                parent[idx] = copy.deepcopy(op["value"])
            elif kind == "test":
                if parent[idx] != op["value"]:
                    raise PatchError(f"test failed at {ptr}: {parent[idx]!r} != {op['value']!r}")
            else:
                raise PatchError(f"unsupported JSON patch op {kind!r}")
        elif isinstance(parent, dict):
            if kind == "add":
                parent[last] = copy.deepcopy(op["value"])
            elif last not in parent:
                raise PatchError(f"path {ptr}: {last!r} not found")
            elif kind == "remove":
                del parent[last]
            elif kind == "replace":
                parent[last] = copy.deepcopy(op["value"])
            elif kind == "test":
                if parent[last] != op["value"]:
                    raise PatchError(f"test failed at {ptr}: {parent[last]!r} != {op['value']!r}")
            else:
                raise PatchError(f"unsupported JSON patch op {kind!r}")
        else:
            raise PatchError(f"path {ptr}: parent is not a container")
    return doc


def apply_patch(obj: dict[str, Any], patch: Any, patch_type: str) -> dict[str, Any]:
    """The object after ``patch``; used by the server and by tests that validate generated patches."""
    if patch_type == "merge":
        return _merge(obj, patch)
    if patch_type == "strategic":
        return _strategic(obj, patch)
    if patch_type == "json":
        return _json_patch(obj, patch)
    raise PatchError(f"unknown patch type {patch_type!r}")


# -- the server -------------------------------------------------------------------------------------
@dataclass
class Fault:
    method: str
    path: str
    status: int
    dry_run: bool | None = False  # None: both real and dry-run requests
    times: int | None = 1  # None: every time
    message: str = "injected failure"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str | None
    status: int = 0

    @property
    def dry_run(self) -> bool:
        return self.query.get("dryRun") == "All"

    @property
    def is_write(self) -> bool:
        return self.method in ("PATCH", "POST", "PUT", "DELETE")


@dataclass
class _Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


def _status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": reason, "code": code}
    if details:
        out["details"] = details
    return out


class FakeKubeAPI:
    """Start with ``with FakeKubeAPI(objects) as kube:`` (or ``start()`` / ``stop()``);
    ``kube.api_client()`` is a real ``ApiClient`` to it, ``kube.host`` its URL."""

    def __init__(self, objects: Iterable[dict[str, Any]] = (), *, validate: bool = True, k8s_version: str = "1.30",
                 host: str = "127.0.0.1", port: int = 0):
        self.objects: dict[str, dict[str, Any]] = {}
        for obj in objects:
            if obj.get("kind") not in SERVED_KINDS:
                raise ValueError(f"{obj.get('kind')!r} objects are not served here; served: {sorted(SERVED_KINDS)}")
            self.objects[object_path(obj)] = obj
        self.originals = copy.deepcopy(self.objects)
        self.validate = validate
        self.k8s_version = k8s_version
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self.evictions: dict[str, list[tuple[int, str | None]]] = {}
        # hooks run on the stored object after each real PATCH (a mutating webhook, a controller fighting us)
        self.after_write: list[Callable[[str, dict[str, Any]], None]] = []
        # called with every recorded request once answered (outside the lock): the demo prints writes
        self.on_request: Callable[[Recorded], None] | None = None
        self._rv = max((int(o["metadata"].get("resourceVersion") or 0) for o in self.objects.values()), default=0)
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def _serve(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip() or None
                rec = Recorded(self.command, url.path, query, body, ctype)
                with outer._lock:
                    reply = outer._handle(rec)
                    rec.status = reply.status
                    outer.requests.append(rec)
                if outer.on_request is not None:
                    outer.on_request(rec)
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _serve  # noqa: N815 - http.server's naming

            def log_message(self, *args: Any) -> None:
                pass

        self._bind = host
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- lifecycle and helpers for tests -----------------------------------------------------------
    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def host(self) -> str:
        return f"http://{self._bind}:{self.port}"

    def api_client(self) -> k8s_client.ApiClient:
        cfg = k8s_client.Configuration(host=self.host)
        cfg.api_key = {"BearerToken": "controller-token"}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
        cfg.retries = False
        return k8s_client.ApiClient(cfg)

    def fail(self, method: str, path: str, status: int, *, dry_run: bool | None = False, times: int | None = 1,
             message: str = "injected failure") -> None:
        self.faults.append(Fault(method.upper(), path, status, dry_run, times, message))

    def script_eviction(self, namespace: str, pod: str, replies: list[tuple[int, str | None]]) -> None:
        """Replies (status, Retry-After) for real evictions of that pod, in order; the last repeats."""
        self.evictions[f"{namespace}/{pod}"] = list(replies)

    def get(self, path: str) -> dict[str, Any] | None:
        with self._lock:
            obj = self.objects.get(path)
            return copy.deepcopy(obj) if obj is not None else None

    def writes(self, *, dry_run: bool | None = None) -> list[Recorded]:
        return [r for r in self.requests if r.is_write and (dry_run is None or r.dry_run == dry_run)]

    # -- request handling (under the lock) ---------------------------------------------------------
    def _handle(self, rec: Recorded) -> _Reply:
        if rec.query.get("dryRun") not in (None, "All"):
            return _Reply(400, _status(400, "BadRequest", f"invalid dryRun {rec.query['dryRun']!r}"))
        for fault in self.faults:
            if fault.method == rec.method and fault.path == rec.path and fault.times != 0 \
                    and (fault.dry_run is None or fault.dry_run == rec.dry_run):
                if fault.times is not None:
                    fault.times -= 1
                reason = {409: "Conflict", 422: "Invalid", 429: "TooManyRequests"}.get(fault.status, "InternalError")
                return _Reply(fault.status, _status(fault.status, reason, fault.message))
        if rec.method == "GET":
            return self._get(rec)
        if rec.method == "PATCH":
            return self._patch(rec)
        if rec.method == "POST" and rec.path.endswith("/eviction"):
            return self._evict(rec)
        return _Reply(405, _status(405, "MethodNotAllowed", f"{rec.method} {rec.path} is not served here"))

    def _get(self, rec: Recorded) -> _Reply:
        if rec.path in self.objects:
            return _Reply(200, self.objects[rec.path])
        items = [o for p, o in sorted(self.objects.items()) if self._in_collection(p, o, rec.path)]
        if not items and not any(rec.path.endswith("/" + plural) for _, plural, _ in SERVED_KINDS.values()):
            return _Reply(404, _status(404, "NotFound", f"{rec.path} not found"))
        for term in filter(None, (rec.query.get("labelSelector") or "").split(",")):
            k, _, v = term.partition("=")
            items = [o for o in items if (o["metadata"].get("labels") or {}).get(k) == v]
        for term in filter(None, (rec.query.get("fieldSelector") or "").split(",")):
            k, _, v = term.partition("=")
            if k != "spec.nodeName":
                return _Reply(400, _status(400, "BadRequest", f"field selector {k} is not supported here"))
            items = [o for o in items if (o.get("spec") or {}).get("nodeName") == v]
        kind = items[0]["kind"] + "List" if items else "List"
        return _Reply(200, {"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": str(self._rv)},
                            "items": items})

    @staticmethod
    def _in_collection(path: str, obj: dict[str, Any], collection: str) -> bool:
        prefix, plural, namespaced = SERVED_KINDS[obj["kind"]]
        if collection == f"{prefix}/{plural}":
            return True
        return namespaced and collection == f"{prefix}/namespaces/{obj['metadata']['namespace']}/{plural}"

    def _patch(self, rec: Recorded) -> _Reply:
        obj = self.objects.get(rec.path)
        if obj is None:
            return _Reply(404, _status(404, "NotFound", f"{rec.path} not found"))
        patch_type = _CONTENT_TYPES.get(rec.content_type or "")
        if patch_type is None or (patch_type == "strategic" and obj["kind"] in CUSTOM_KINDS):
            return _Reply(415, _status(415, "UnsupportedMediaType", f"the body of type {rec.content_type} is unsupported"))
        try:
            new = apply_patch(obj, rec.body, patch_type)
        except (PatchError, KeyError, ValueError, TypeError) as exc:
            return _Reply(422, _status(422, "Invalid", f"{obj['kind']} {obj['metadata']['name']}: {exc}"))
        if new.get("kind") != obj["kind"] or new["metadata"].get("name") != obj["metadata"]["name"]:
            return _Reply(422, _status(422, "Invalid", "kind and name are immutable"))
        if obj["kind"] == "Job" and new["spec"].get("template") != obj["spec"].get("template"):
            return _Reply(422, _status(422, "Invalid", f'Job.batch "{obj["metadata"]["name"]}" is invalid: '
                                       "spec.template: Invalid value: field is immutable"))
        if self.validate:
            try:
                validate_object(new, self.k8s_version)
            except ValueError as exc:
                return _Reply(422, _status(422, "Invalid", f"{obj['kind']} {obj['metadata']['name']} is invalid: "
                                           f"{exc}"))
        if not rec.dry_run:
            self._rv += 1
            new["metadata"]["resourceVersion"] = str(self._rv)
            if new.get("spec") != obj.get("spec") and "generation" in obj["metadata"]:
                new["metadata"]["generation"] = int(obj["metadata"]["generation"]) + 1
            self.objects[rec.path] = new
            for hook in self.after_write:
                hook(rec.path, new)
        return _Reply(200, new)

    def _evict(self, rec: Recorded) -> _Reply:
        pod_path = rec.path.removesuffix("/eviction")
        pod = self.objects.get(pod_path)
        body = rec.body if isinstance(rec.body, dict) else {}
        if body.get("kind") != "Eviction" or body.get("apiVersion") != "policy/v1":
            return _Reply(400, _status(400, "BadRequest", "the body must be a policy/v1 Eviction"))
        if pod is None:
            return _Reply(404, _status(404, "NotFound", f'pods "{pod_path.rsplit("/", 1)[-1]}" not found'))
        meta = pod["metadata"]
        if body.get("metadata", {}).get("name") != meta["name"]:
            return _Reply(400, _status(400, "BadRequest", "the Eviction's name does not match the pod"))
        key = f"{meta['namespace']}/{meta['name']}"
        covering = [o for o in self.objects.values() if o["kind"] == "PodDisruptionBudget"
                    and o["metadata"]["namespace"] == meta["namespace"]
                    and all((meta.get("labels") or {}).get(k) == v
                            for k, v in o["spec"]["selector"].get("matchLabels", {}).items())]
        script = self.evictions.get(key)
        if script is not None and not rec.dry_run:
            status, retry_after = script.pop(0) if len(script) > 1 else script[0]
        else:
            blocked = any(int((b.get("status") or {}).get("disruptionsAllowed", 0)) <= 0 for b in covering)
            status, retry_after = (429, "5") if blocked else (201, None)
        if status == 429:
            name = covering[0]["metadata"]["name"] if covering else "(scripted)"
            return _Reply(429, _status(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's "
                                       "disruption budget.", causes=[{"reason": "DisruptionBudget", "message":
                                       f"The disruption budget {name} needs more healthy pods"}]),
                          {"Retry-After": retry_after} if retry_after else {})
        if status >= 300:
            return _Reply(status, _status(status, "InternalError", "scripted eviction failure"))
        if not rec.dry_run:
            del self.objects[pod_path]
            for b in covering:
                b["status"]["disruptionsAllowed"] = max(0, int(b["status"]["disruptionsAllowed"]) - 1)
        return _Reply(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})


def originals_equal(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Equal modulo resourceVersion / generation / managedFields (what a restore cannot bring back)."""
    def strip(o: dict[str, Any]) -> dict[str, Any]:
        o = copy.deepcopy(o)
        for k in ("resourceVersion", "generation", "managedFields"):
            o["metadata"].pop(k, None)
        return o
    return strip(before) == strip(after)


def iter_objects(folder: Path) -> Iterator[dict[str, Any]]:
    """The objects of every ``*.json`` file of a folder (an object or a ``...List``), in file order."""
    for f in sorted(folder.glob("*.json")):
        doc = json.loads(f.read_text())
        yield from (doc["items"] if doc["kind"].endswith("List") else [doc])
