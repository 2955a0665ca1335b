"""The demo fleet as Kubernetes objects: what ``gpufinops demo-cluster`` serves with ``testsupport.fakeapi``.

No kube-apiserver runs beside the demo, so the change loop (propose -> approve -> apply -> verify ->
roll back) needs a cluster built from the lake: per cluster, from the latest Kubernetes snapshot
(``k8s_nodes`` / ``k8s_pods`` landing tables, newest ``day=`` partition only, so it stays fast on the
full demo):

- **Nodes** with the labels the ingester saw (node pool, ``nvidia.com/gpu.product``,
  ``nvidia.com/mig.config`` on MIG nodes, ``karpenter.sh/capacity-type``), taints, capacity and
  allocatable, ``spec.unschedulable``;
- **Pods** running (or pending) at the latest snapshot, with ``ownerReferences`` and ``nodeName``;
- the **top-level workloads** of those pods, each with a pod template copied from one of its pods
  (containers with the requests / limits it had, labels, nodeSelector, tolerations) and ``replicas``
  = its pods now. ``workload_days=N`` adds the workloads last seen in the newest N day partitions
  (0 replicas; slower, the nested columns of those days are decoded) so that recommendations about
  workloads not running right now find an object too;
- an autoscaling/v2 **HorizontalPodAutoscaler** beside every serving Deployment.

The custom kinds are served as themselves, at their real API paths (``controller.crds``), with the
pod template of one of their pods: a Kubeflow ``Notebook`` (``spec.template``; stopped ones carry
``kubeflow-resource-stopped``), a ``PyTorchJob`` (a Master replica, plus Workers when it has several
pods), a ``RayJob`` (a head group without GPUs and one worker group with the pods' template) and a KServe
``InferenceService`` (``spec.predictor.model`` holding ``kserve-container``'s resources, the injected
``istio-proxy`` left out, min/max replicas around its pods). Their pods' ``ownerReferences`` point at
them. DaemonSet pods are served (drains skip them) but not their DaemonSet. Every object passes
``testsupport.fakeapi.validate_object`` (kubernetes-validate strict; for a CR, its pod templates) (tested).
"""

from __future__ import annotations

import copy
import math
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from controller.crds import CUSTOM_KINDS, KSERVE_CONTAINER, NOTEBOOK_STOPPED, api_version
from gpufinops.errors import ConfigError, InputError
from testsupport.fakeapi import FakeKubeAPI

__all__ = [
    "DemoCluster",
    "DemoServer",
    "build_demo_cluster",
    "build_demo_clusters",
    "kubeconfig_doc",
    "lake_clusters",
    "start_demo_servers",
    "stop_demo_servers",
]

# labels the operators put on pods (not part of the CR's template)
_OPERATOR_LABEL_PREFIXES = ("training.kubeflow.org/", "ray.io/", "serving.kserve.io/")
_OPERATOR_LABELS = ("notebook-name", "statefulset")
_GPU_PREFIXES = ("nvidia.com/", "amd.com/gpu")
_RAY_GROUP = re.compile(r"-([a-z0-9]+-group)-worker-")
_BUILT_IN = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1", "CronJob": "batch/v1"}
_SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "monitoring", "gpu-operator"})
_SAFE = re.compile(r"[^A-Za-z0-9.-]+")  # the lake writer's partition-name rule
_NS = uuid.UUID("6a0f3c52-9f5e-4a43-9b3c-2d8f0b1e7c11")  # uuid5 namespace of the demo objects' uids
_POD_ONLY_LABELS = ("pod-template-hash", "controller-revision-hash", "statefulset.kubernetes.io/pod-name",
                    "batch.kubernetes.io/controller-uid", "controller-uid", "job-name", "batch.kubernetes.io/job-name")
_OWNER_API = {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Job": "batch/v1",
              "CronJob": "batch/v1", "Deployment": "apps/v1", "Notebook": "kubeflow.org/v1",
              "PyTorchJob": "kubeflow.org/v1", "RayJob": "ray.io/v1", "InferenceService": "serving.kserve.io/v1beta1"}


@dataclass
class DemoCluster:
    """One cluster's objects (ready for ``FakeKubeAPI``) and what they came from."""

    name: str
    snapshot_at: datetime
    objects: list[dict[str, Any]] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for o in self.objects if o["kind"] == kind)

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.objects:
            out[o["kind"]] = out.get(o["kind"], 0) + 1
        return dict(sorted(out.items()))


# -- quantities and small helpers ----------------------------------------------------------------------
def _cpu(cores: float) -> str:
    milli = math.ceil(round(cores * 1000, 6))
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _bytes(n: float) -> str:
    b = int(round(n))
    for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if b and b % size == 0:
            return f"{b // size}{unit}"
    return str(b)


def _quantity(resource: str, value: float) -> str:
    if resource == "cpu":
        return _cpu(value)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return _bytes(value)
    return str(int(value)) if float(value).is_integer() else _cpu(value)


def _quantities(m: Mapping[str, float] | None) -> dict[str, str]:
    return {k: _quantity(k, float(v)) for k, v in (m or {}).items() if v is not None}


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(_NS, "/".join(parts)))


def _ts(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


def _map(value: Any) -> dict[str, str]:
    """A DuckDB MAP (a dict, or {'key': [...], 'value': [...]}) as a plain dict of strings."""
    if not value:
        return {}
    if isinstance(value, dict) and set(value) == {"key", "value"} and isinstance(value["key"], list):
        value = dict(zip(value["key"], value["value"], strict=True))
    return {str(k): str(v) for k, v in dict(value).items() if v is not None}


def _containers(rows: Iterable[Mapping[str, Any]] | None, workload: str) -> list[dict[str, Any]]:
    out = []
    for c in rows or []:
        resources: dict[str, dict[str, str]] = {}
        for section in ("requests", "limits"):
            q = _quantities(_map_floats(c.get(section)))
            if q:
                resources[section] = q
        out.append({"name": c["name"], "image": f"registry.example.com/demo/{workload}:latest",
                    "imagePullPolicy": "IfNotPresent", "resources": resources,
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
    return out


def _map_floats(value: Any) -> dict[str, float]:
    if not value:
        return {}
    if isinstance(value, dict) and set(value) == {"key", "value"} and isinstance(value["key"], list):
        value = dict(zip(value["key"], value["value"], strict=True))
    return {str(k): float(v) for k, v in dict(value).items() if v is not None}


def _tolerations(rows: Iterable[Mapping[str, Any]] | None) -> list[dict[str, str]]:
    return [{k: v for k, v in t.items() if v is not None} for t in rows or []]


def _pod_spec(row: Mapping[str, Any], workload: str, restart: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": _containers(row["containers"], workload), "restartPolicy": restart,
                            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                            "schedulerName": "default-scheduler"}
    init = _containers(row["init_containers"], workload)
    if init:
        spec["initContainers"] = init
    selector = _map(row["node_selector"])
    if selector:
        spec["nodeSelector"] = selector
    tolerations = _tolerations(row["tolerations"])
    if tolerations:
        spec["tolerations"] = tolerations
    if row["priority_class"]:
        spec["priorityClassName"] = row["priority_class"]
    return spec


# -- reading the lake ------------------------------------------------------------------------------
def _cluster_dirs(lake: Path, table: str) -> dict[str, Path]:
    root = lake / table
    return {p.name.removeprefix("cluster="): p for p in sorted(root.glob("cluster=*")) if p.is_dir()}


def _day_files(cluster_dir: Path, days: int) -> list[str]:
    day_dirs = sorted(d for d in cluster_dir.glob("day=*") if any(d.glob("*.parquet")))
    return [str(f) for d in day_dirs[-days:] for f in sorted(d.glob("*.parquet"))]


def lake_clusters(lake_dir: Path) -> list[str]:
    """The clusters with a Kubernetes pod snapshot in the lake (their names as in the data)."""
    out = []
    con = duckdb.connect()
    try:
        for cdir in _cluster_dirs(lake_dir, "k8s_pods").values():
            files = _day_files(cdir, 1)
            if files:
                row = con.execute("select any_value(cluster) from read_parquet(?, hive_partitioning=false)",
                                  [files]).fetchone()
                if row and row[0]:
                    out.append(str(row[0]))
    finally:
        con.close()
    return sorted(out)


def _dicts(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


_POD_COLS = ("namespace, pod, uid, node, phase, qos_class, priority, priority_class, owner_kind, owner_name, "
             "labels, annotations, containers, init_containers, start_time, node_selector, tolerations, snapshot_ts")


def _latest(con: duckdb.DuckDBPyConnection, columns: str, files: list[str], cluster: str,
            key: str) -> list[dict[str, Any]]:
    """The rows of the newest snapshot (filtered by value: the files are sorted by time, so DuckDB
    reads only the last row groups), one per key."""
    row = con.execute("select max(snapshot_ts) from read_parquet(?, hive_partitioning=false) where cluster = ?",
                      [files, cluster]).fetchone()
    if row is None or row[0] is None:
        return []
    return _dicts(con, f"""
        select {columns} from read_parquet(?, hive_partitioning=false) where cluster = ? and snapshot_ts = ?
        qualify row_number() over (partition by {key} order by ingested_at desc) = 1
        order by {key}""", [files, cluster, row[0]])


def _older_workloads(con: duckdb.DuckDBPyConnection, files: list[str], cluster: str,
                     known: set[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """Workloads last seen before the newest snapshot (0 replicas now), one pod of their last snapshot
    each. Slower: the nested columns of every day read are decoded."""
    rows = _dicts(con, f"""
        with p as (
            select namespace, owner_kind, owner_name, snapshot_ts, pod from read_parquet(?, hive_partitioning=false)
            where cluster = ? and owner_kind is not null and owner_name is not null and owner_kind <> 'DaemonSet'
        ),
        last as (select namespace, owner_kind, owner_name, max(snapshot_ts) as last_ts, 0 as replicas
                 from p group by all),
        rep as (select l.*, min(p.pod) as rep_pod from last l join p using (namespace, owner_kind, owner_name)
                where p.snapshot_ts = l.last_ts group by all)
        select r.replicas, {", ".join("p." + c.strip() for c in _POD_COLS.split(","))}
        from read_parquet(?, hive_partitioning=false) p
        join rep r on p.namespace = r.namespace and p.pod = r.rep_pod and p.snapshot_ts = r.last_ts
        where p.cluster = ?
        qualify row_number() over (partition by p.namespace, p.owner_kind, p.owner_name order by p.pod) = 1
        """, [files, cluster, files, cluster])
    return [r for r in rows if (r["namespace"], r["owner_kind"], r["owner_name"]) not in known]


def build_demo_cluster(lake_dir: Path, cluster: str, *, workload_days: int = 0) -> DemoCluster:
    """The objects of ``cluster`` from the lake's latest Kubernetes snapshot (see the module doc)."""
    pods_dir = _cluster_dirs(lake_dir, "k8s_pods")
    nodes_dir = _cluster_dirs(lake_dir, "k8s_nodes")
    key = cluster if cluster in pods_dir else _SAFE.sub("-", cluster).strip("-")
    if key not in pods_dir or key not in nodes_dir:
        raise InputError(f"cluster {cluster!r} has no k8s_pods / k8s_nodes snapshot in the lake {lake_dir}; "
                         f"clusters there: {', '.join(sorted(pods_dir)) or 'none'} (run `gpufinops demo` first)")
    pod_files, node_files = _day_files(pods_dir[key], 1), _day_files(nodes_dir[key], 1)
    if not pod_files or not node_files:
        raise InputError(f"cluster {cluster!r}: the lake {lake_dir} has no k8s_pods / k8s_nodes parquet files")
    con = duckdb.connect()
    try:
        node_rows = _latest(con, "*", node_files, cluster, "node")
        pod_rows = _latest(con, _POD_COLS, pod_files, cluster, "namespace, pod")
        snapshot_at = pod_rows[0]["snapshot_ts"] if pod_rows else None
        by_workload: dict[tuple[str, str, str], dict[str, Any]] = {}
        for r in pod_rows:
            if r["owner_kind"] and r["owner_name"] and r["owner_kind"] != "DaemonSet":
                k = (r["namespace"], r["owner_kind"], r["owner_name"])
                if k in by_workload:
                    by_workload[k]["replicas"] += 1
                else:
                    by_workload[k] = {**r, "replicas": 1}
        workload_rows = list(by_workload.values())
        if workload_days > 0:
            workload_rows += _older_workloads(con, _day_files(pods_dir[key], workload_days), cluster, set(by_workload))
    finally:
        con.close()
    if not node_rows:
        raise InputError(f"cluster {cluster!r}: no k8s_nodes rows in the latest day of the lake {lake_dir}")
    snapshot_at = snapshot_at or node_rows[0]["snapshot_ts"]
    out = DemoCluster(name=cluster, snapshot_at=snapshot_at)
    out.objects.extend(_node(cluster, r) for r in node_rows)
    live_nodes = {r["node"] for r in node_rows}
    workloads: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in workload_rows:
        obj = _workload(cluster, r, snapshot_at)
        if obj is not None:
            workloads[(r["namespace"], r["owner_kind"], r["owner_name"])] = obj
            out.objects.append(obj)
            if obj["kind"] == "Deployment" and r["namespace"] not in _SYSTEM_NAMESPACES:
                out.objects.append(_hpa(cluster, obj))
    for r in pod_rows:
        out.objects.append(_pod(cluster, r, workloads.get((r["namespace"], r["owner_kind"], r["owner_name"])),
                                r["node"] in live_nodes))
    return out


def build_demo_clusters(lake_dir: Path, clusters: Sequence[str] | None = None, *,
                        workload_days: int = 0) -> list[DemoCluster]:
    """Every cluster of the lake (or the named ones), each from its latest snapshot."""
    names = list(clusters) if clusters else lake_clusters(lake_dir)
    if not names:
        raise InputError(f"the lake {lake_dir} has no Kubernetes snapshot (k8s_pods); run `gpufinops demo` first")
    return [build_demo_cluster(lake_dir, c, workload_days=workload_days) for c in names]


# -- objects ---------------------------------------------------------------------------------------
def _node(cluster: str, r: Mapping[str, Any]) -> dict[str, Any]:
    labels = _map(r["labels"])
    name = r["node"]
    labels.setdefault("kubernetes.io/hostname", name)
    if r.get("gpu_product"):
        labels.setdefault("nvidia.com/gpu.product", r["gpu_product"])
    if r.get("mig_config"):
        labels.setdefault("nvidia.com/mig.config", r["mig_config"])
    if r.get("capacity_type") in ("spot", "on_demand"):
        labels.setdefault("karpenter.sh/capacity-type", "spot" if r["capacity_type"] == "spot" else "on-demand")
    spec: dict[str, Any] = {}
    if r.get("provider_id"):
        spec["providerID"] = r["provider_id"]
    taints = [{k: v for k, v in t.items() if v is not None} for t in r.get("taints") or []]
    if taints:
        spec["taints"] = taints
    if r.get("unschedulable"):
        spec["unschedulable"] = True
    ts = _ts(r["snapshot_ts"])
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": r.get("uid") or _uid(cluster, "Node", name), "resourceVersion": "1",
                     "creationTimestamp": ts, "labels": labels, "annotations": _map(r["annotations"])},
        "spec": spec,
        "status": {
            "capacity": _quantities(_map_floats(r["capacity"])),
            "allocatable": _quantities(_map_floats(r["allocatable"])),
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": ts, "lastTransitionTime": ts,
                            "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
        },
    }


def _template_labels(r: Mapping[str, Any]) -> dict[str, str]:
    labels = {k: v for k, v in _map(r["labels"]).items() if k not in _POD_ONLY_LABELS}
    return labels


def _workload(cluster: str, r: Mapping[str, Any], snapshot_at: datetime) -> dict[str, Any] | None:
    kind, name, ns = r["owner_kind"], r["owner_name"], r["namespace"]
    if kind in CUSTOM_KINDS:
        return _custom(cluster, r, snapshot_at)
    if kind not in _BUILT_IN:
        return None
    labels = _template_labels(r)
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": _uid(cluster, ns, kind, name), "resourceVersion": "1",
                            "generation": 1, "creationTimestamp": _ts(r["start_time"] or snapshot_at),
                            "labels": dict(labels)}
    replicas = int(r["replicas"])
    restart = "Always" if kind in ("Deployment", "StatefulSet") else "OnFailure"
    template = {"metadata": {"labels": dict(labels)}, "spec": _pod_spec(r, name, restart)}
    spec: dict[str, Any]
    if kind in ("Deployment", "StatefulSet"):
        selector = {"matchLabels": labels} if labels else None
        if selector is None:  # a template needs a label the selector can match
            labels = {"app.kubernetes.io/instance": name[:63].rstrip("-_.")}
            template["metadata"]["labels"] = dict(labels)
            selector = {"matchLabels": labels}
        spec = {"replicas": replicas, "selector": selector, "template": template}
        if kind == "Deployment":
            spec.update({"revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                         "strategy": {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}})
        else:
            spec.update({"serviceName": name, "podManagementPolicy": "OrderedReady",
                         "updateStrategy": {"type": "RollingUpdate"}})
        status: dict[str, Any] = {"observedGeneration": 1, "replicas": replicas, "readyReplicas": replicas}
    elif kind == "Job":
        spec = {"parallelism": max(1, replicas), "backoffLimit": 6, "suspend": False, "template": template}
        status = {"active": replicas} if replicas else {}
    else:  # CronJob
        spec = {"schedule": "0 */6 * * *", "concurrencyPolicy": "Forbid", "suspend": False,
                "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                "jobTemplate": {"metadata": {"labels": dict(labels)}, "spec": {"backoffLimit": 1, "template": template}}}
        status = {}
    return {"apiVersion": _BUILT_IN[kind], "kind": kind, "metadata": meta, "spec": spec, "status": status}


def _custom(cluster: str, r: Mapping[str, Any], snapshot_at: datetime) -> dict[str, Any]:
    """A Notebook / PyTorchJob / RayJob / InferenceService from one of its pods (see the module doc)."""
    kind, name, ns = r["owner_kind"], r["owner_name"], r["namespace"]
    labels = {k: v for k, v in _template_labels(r).items()
              if not k.startswith(_OPERATOR_LABEL_PREFIXES) and k not in _OPERATOR_LABELS}
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": _uid(cluster, ns, kind, name), "resourceVersion": "1",
                            "generation": 1, "creationTimestamp": _ts(r["start_time"] or snapshot_at),
                            "labels": dict(labels)}
    replicas = int(r["replicas"])
    spec: dict[str, Any]
    status: dict[str, Any] = {}
    if kind == "Notebook":
        spec = {"template": {"spec": _pod_spec(r, name, "Always")}}
        status = {"readyReplicas": replicas}
        if replicas == 0:
            meta["annotations"] = {NOTEBOOK_STOPPED: _ts(snapshot_at)}
    elif kind == "PyTorchJob":
        annotations = _map(r["annotations"])
        if annotations:
            meta["annotations"] = annotations  # gpufinops.io/checkpointed: what the recommender read
        template = {"metadata": {"labels": dict(labels)}, "spec": _pod_spec(r, name, "OnFailure")}
        specs = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}}
        if replicas > 1:
            specs["Worker"] = {"replicas": replicas - 1, "restartPolicy": "OnFailure", "template": copy.deepcopy(template)}
        spec = {"runPolicy": {"cleanPodPolicy": "None", "suspend": False}, "pytorchReplicaSpecs": specs}
    elif kind == "RayJob":
        worker = _pod_spec(r, name, "Always")
        head = copy.deepcopy(worker)
        for c in head["containers"]:
            c["name"] = "ray-head"
            for section in c["resources"].values():
                for res in [k for k in section if k.startswith(_GPU_PREFIXES)]:
                    del section[res]
        head["containers"] = head["containers"][:1]
        m = _RAY_GROUP.search(str(r["pod"]))
        spec = {"entrypoint": "python main.py", "shutdownAfterJobFinishes": True, "suspend": False,
                "rayClusterSpec": {"rayVersion": "2.9.0",
                                   "headGroupSpec": {"rayStartParams": {}, "template": {"spec": head}},
                                   "workerGroupSpecs": [{"groupName": m.group(1) if m else "gpu-group",
                                                         "replicas": replicas, "minReplicas": 0,
                                                         "maxReplicas": max(1, replicas), "rayStartParams": {},
                                                         "template": {"spec": worker}}]}}
    else:  # InferenceService
        pod = _pod_spec(r, name, "Always")
        containers = [c for c in pod["containers"] if c["name"] != "istio-proxy"]  # injected by the mesh
        predictor: dict[str, Any] = {k: pod[k] for k in ("nodeSelector", "tolerations", "priorityClassName") if k in pod}
        main = next((c for c in containers if c["name"] == KSERVE_CONTAINER), None)
        if main is not None:
            predictor["model"] = {"modelFormat": {"name": "pytorch"}, "storageUri": f"s3://models/{ns}/{name}",
                                  "resources": main["resources"]}
            containers = [c for c in containers if c is not main]
        if containers:
            predictor["containers"] = containers
        lo = max(1, replicas)
        predictor.update(minReplicas=lo, maxReplicas=max(2, 2 * lo))
        spec = {"predictor": predictor}
    return {"apiVersion": api_version(kind), "kind": kind, "metadata": meta, "spec": spec, "status": status}


def _hpa(cluster: str, deploy: Mapping[str, Any]) -> dict[str, Any]:
    meta = deploy["metadata"]
    replicas = int(deploy["spec"]["replicas"])
    lo = max(1, replicas)
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "uid": _uid(cluster, meta["namespace"], "HorizontalPodAutoscaler", meta["name"]),
                     "resourceVersion": "1", "creationTimestamp": meta["creationTimestamp"],
                     "labels": dict(meta.get("labels") or {})},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"]},
                 "minReplicas": lo, "maxReplicas": max(2, 2 * lo),
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                     "type": "Utilization", "averageUtilization": 70}}}]},
        "status": {"currentReplicas": replicas, "desiredReplicas": replicas},
    }


def _owner_ref(cluster: str, r: Mapping[str, Any], workload: Mapping[str, Any] | None) -> dict[str, Any] | None:
    kind, name = r["owner_kind"], r["owner_name"]
    if not kind or not name:
        return None
    labels = _map(r["labels"])
    if workload is not None:
        wkind = workload["kind"]
        if wkind == "Deployment":  # pods belong to the Deployment's ReplicaSet
            rs = f"{workload['metadata']['name']}-{labels.get('pod-template-hash') or 'demo'}"
            return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                    "uid": _uid(cluster, r["namespace"], "ReplicaSet", rs), "controller": True,
                    "blockOwnerDeletion": True}
        if wkind == "CronJob":  # pods belong to the Job the CronJob started
            job = labels.get("job-name") or labels.get("batch.kubernetes.io/job-name") or f"{name}-run"
            return {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": _uid(cluster, r["namespace"], "Job", job),
                    "controller": True, "blockOwnerDeletion": True}
        return {"apiVersion": workload["apiVersion"], "kind": wkind, "name": workload["metadata"]["name"],
                "uid": workload["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": _OWNER_API.get(kind, "v1"), "kind": kind, "name": name,
            "uid": _uid(cluster, r["namespace"], kind, name), "controller": True, "blockOwnerDeletion": True}


def _pod(cluster: str, r: Mapping[str, Any], workload: Mapping[str, Any] | None, on_known_node: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": r["pod"], "namespace": r["namespace"], "uid": r["uid"] or _uid(cluster, r["pod"]),
                            "resourceVersion": "1", "creationTimestamp": _ts(r["start_time"] or r["snapshot_ts"]),
                            "labels": _map(r["labels"])}
    annotations = _map(r["annotations"])
    if annotations:
        meta["annotations"] = annotations
    owner = _owner_ref(cluster, r, workload)
    if owner is not None:
        meta["ownerReferences"] = [owner]
    restart = "OnFailure" if (workload or {}).get("kind") in ("Job", "CronJob", "PyTorchJob") else "Always"
    spec = _pod_spec(r, r["owner_name"] or r["pod"], restart)
    if r["node"] and on_known_node:
        spec["nodeName"] = r["node"]
    if r["priority"] is not None:
        spec["priority"] = int(r["priority"])
    status: dict[str, Any] = {"phase": r["phase"] or "Pending"}
    if r["qos_class"]:
        status["qosClass"] = r["qos_class"]
    if r["start_time"] is not None:
        status["startTime"] = _ts(r["start_time"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


# -- serving ---------------------------------------------------------------------------------------
@dataclass
class DemoServer:
    """One cluster served by a ``FakeKubeAPI`` on loopback."""

    cluster: DemoCluster
    api: FakeKubeAPI

    @property
    def name(self) -> str:
        return self.cluster.name

    @property
    def host(self) -> str:
        return self.api.host


def kubeconfig_doc(servers: Sequence[DemoServer]) -> dict[str, Any]:
    """A kubeconfig with one context per cluster, named after the cluster (the first is current)."""
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "current-context": servers[0].name if servers else "",
        "clusters": [{"name": f"demo-{s.name}", "cluster": {"server": s.host}} for s in servers],
        "users": [{"name": "gpufinops-demo", "user": {"token": "demo"}}],
        "contexts": [{"name": s.name, "context": {"cluster": f"demo-{s.name}", "user": "gpufinops-demo"}}
                     for s in servers],
    }


def start_demo_servers(clusters: Sequence[DemoCluster], *, port: int = 6443, host: str = "127.0.0.1",
                       validate: bool = True) -> list[DemoServer]:
    """Serve each cluster on its own port (``port``, ``port + 1``, ...; 0 = any free ports). Stop them
    with ``stop_demo_servers``. A port in use is a ``ConfigError`` naming it."""
    servers: list[DemoServer] = []
    try:
        for i, c in enumerate(clusters):
            p = port + i if port else 0
            try:
                api = FakeKubeAPI(c.objects, validate=validate, host=host, port=p)
            except OSError as exc:
                raise ConfigError(f"cannot serve the demo cluster {c.name} on {host}:{p}: {exc} "
                                  "(choose another --port)") from exc
            servers.append(DemoServer(c, api.start()))
    except BaseException:
        stop_demo_servers(servers)
        raise
    return servers


def stop_demo_servers(servers: Sequence[DemoServer]) -> None:
    for s in servers:
        s.api.stop()
