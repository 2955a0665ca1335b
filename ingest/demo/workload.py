"""The demo's tenants, teams, namespaces and pods, replayed from the openb pod list.

Pod shapes (CPU, memory, GPUs, GPU fraction, QoS) are sampled with replacement from
``openb_pod_list_default.csv``; the trace's busy span is compressed into the demo window; enough
pods are drawn for each pool to reach the target GPU allocation. Tiers, owners and names follow
what a real cluster of this kind runs.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ingest.demo.catalog import MIG_PROFILES
from ingest.demo.fleet import TIMESLICE_REPLICAS, Fleet, Node

__all__ = [
    "NamespaceSpec",
    "NAMESPACES",
    "SYSTEM_NAMESPACES",
    "PodSpec",
    "WorkloadOptions",
    "make_pods",
    "namespace_objects",
    "qos_class",
]

_MIB = float(1 << 20)


@dataclass(frozen=True)
class NamespaceSpec:
    name: str
    team: str | None
    tenant: str | None
    attribution: str  # labels | annotations | seed | none
    weights: dict[str, float]  # tier -> how much of that tier runs here
    deployments: tuple[str, ...] = ()
    sidecar: bool = False


# ≥ 8 teams in 4 tenants; attribution comes from labels, annotations only (ads-creative), the
# mapping seed only (research-rl) or nowhere (sandbox, scratch-gpu -> unassigned).
NAMESPACES: tuple[NamespaceSpec, ...] = (
    NamespaceSpec("search-ranking", "ranking", "search", "labels", {"serving": 3, "training": 1},
                  ("ranker-bert", "ltr-scorer", "query-embedder"), True),
    NamespaceSpec("search-retrieval", "retrieval", "search", "labels", {"serving": 2, "batch": 1.5, "cpu-serving": 1},
                  ("dense-retriever", "ann-index", "reranker"), True),
    NamespaceSpec("ads-ctr", "ctr", "ads", "labels", {"serving": 3, "training": 1.5, "batch": 1, "cpu-serving": 1},
                  ("ctr-predictor", "bid-shading", "ctr-dcn"), True),
    NamespaceSpec("ads-creative", "creative", "ads", "annotations", {"serving": 1, "training": 1.5, "notebook": 0.5},
                  ("sd-creative", "caption-gen")),
    NamespaceSpec("research-llm", "llm", "research", "labels", {"serving": 0.5, "training": 4, "notebook": 2},
                  ("llm-eval-server",)),
    NamespaceSpec("research-vision", "vision", "research", "labels", {"training": 3, "notebook": 2, "batch": 0.5},
                  ("vit-demo",)),
    NamespaceSpec("research-rl", "rl", "research", "seed", {"training": 2}),
    NamespaceSpec("ml-serving", "ml-platform", "platform", "labels", {"serving": 3, "cpu-serving": 1},
                  ("llm-gateway", "triton-shared", "embedding-svc", "whisper-asr")),
    NamespaceSpec("data-pipelines", "data", "platform", "labels", {"batch": 3, "cpu-batch": 3},
                  ("feature-api",)),
    NamespaceSpec("sandbox", None, None, "none", {"notebook": 2, "cpu-batch": 0.5}),
    NamespaceSpec("scratch-gpu", None, None, "none", {"notebook": 1, "batch": 1}),
)
SYSTEM_NAMESPACES = ("kube-system", "gpu-operator", "monitoring")
# Pods of every third ml-serving deployment are labelled for the team whose model they serve.
_POD_TEAM_OVERRIDE = {"team": "ranking", "tenant": "search"}

_TRAIN_NAMES = ("llama-ft", "bert-pretrain", "vit-train", "dcn-train", "sd-finetune", "ppo-agent", "t5-distill",
                "resnet-sweep", "whisper-ft", "moe-pretrain")
_BATCH_NAMES = ("embed-backfill", "batch-infer", "feature-gen", "index-build", "eval-suite", "label-propagate")
_CPU_BATCH_NAMES = ("etl-hourly", "log-compact", "report-gen", "dedup")
_CPU_SERVING_NAMES = ("feature-api", "gateway", "admin-ui", "metadata-svc")
_USERS = ("alice", "bob", "chen", "dmitri", "eve", "farah", "gus", "hana", "ivan", "jun", "kofi", "lena")

# Lifetime floors after compression (a Deployment replica lives hours, not minutes).
_MIN_LIFETIME_S = {"serving": 6 * 3600, "cpu-serving": 6 * 3600, "training": 1800, "batch": 900,
                   "cpu-batch": 900, "notebook": 2 * 3600}
# Share of pods that hold GPUs at ~0% (the waste the product exists to find).
_MULTI_GPU_WEIGHT = 6.0
_IDLE_SHARE = {"training": 0.15, "batch": 0.05, "notebook": 0.75, "serving": 0.0}


@dataclass
class PodSpec:
    """One pod: identity, requests, lifecycle (filled by the scheduler) and telemetry traits."""

    cluster: str
    namespace: str
    name: str
    uid: str
    tier: str  # serving | training | batch | interactive | system
    owner_kind: str
    owner_name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    containers: list[tuple[str, dict[str, float], dict[str, float]]]
    priority: int
    priority_class: str | None
    cls: str  # whole | mig | timeslice | fractional | cpu | system
    n_gpu: int = 0
    mig_profile: str | None = None
    milli: int = 0  # fractional: the annotation value; timeslice: 1000 / replicas
    gpu_equiv: float = 0.0
    cpu: float = 0.0
    memory: float = 0.0
    created: float = 0.0
    duration: float = 0.0
    pin_node: int | None = None  # DaemonSet pods are bound to their node
    # filled by the scheduler
    sched: float = math.nan
    deleted: float = math.nan
    node: int = -1
    devices: list[int] = field(default_factory=list)  # device ids or MIG instance ids of the cluster
    # telemetry traits
    activity: int = 0  # 0 replay serving, 1 busy training, 2 idle, 3 bursty notebook, 4 busy batch
    cpu_ratio: float = 0.5
    mem_ratio: float = 0.7

    @property
    def qos_class(self) -> str:
        return qos_class(self.containers)


def qos_class(containers: list[tuple[str, dict[str, float], dict[str, float]]]) -> str:
    """Kubernetes' rule: Guaranteed if every container's cpu and memory limits equal requests."""
    any_set = False
    guaranteed = True
    for _, req, lim in containers:
        for r in ("cpu", "memory"):
            if r in req or r in lim:
                any_set = True
            if r not in lim or req.get(r, lim[r]) != lim[r]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


@dataclass
class WorkloadOptions:
    window_start: float
    window_end: float
    seed: int
    target_allocation: float = 0.72
    warmup_s: float = 12 * 3600
    max_pods_per_mode: int = 400_000


def _h(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest(), "big")


_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the characters Kubernetes uses in generated names
_BYTE_TO_CHAR = bytes(ord(_ALPHABET[b % len(_ALPHABET)]) for b in range(256))


def _suffix(rng: np.random.Generator, n: int) -> str:
    return rng.bytes(n).translate(_BYTE_TO_CHAR).decode()


def _namespace_table(tier_key: str) -> tuple[list[NamespaceSpec], np.ndarray]:
    cands = [ns for ns in NAMESPACES if tier_key in ns.weights]
    w = np.cumsum([ns.weights[tier_key] for ns in cands])
    return cands, w / w[-1]


_NS_BY_TIER = {t: _namespace_table(t) for t in ("serving", "cpu-serving", "training", "batch", "cpu-batch", "notebook")}


def _pick_namespace(tier_key: str, rng: np.random.Generator) -> NamespaceSpec:
    cands, cum = _NS_BY_TIER[tier_key]
    return cands[min(len(cands) - 1, int(np.searchsorted(cum, rng.random(), side="right")))]


class _Trace:
    """The openb pod list, with the compression of its busy span into the demo window."""

    def __init__(self, openb_dir: Path, opts: WorkloadOptions):
        df = pd.read_csv(openb_dir / "openb_pod_list_default.csv")
        df["memory_mib"] = df["memory_mib"].fillna(0)
        self.df = df
        # The trace's pods cluster in its last ~35 days; the first percentile of creation times
        # marks the start of that busy span (the rest are a handful of long-running pods).
        self.t_lo = float(df["creation_time"].quantile(0.01))
        self.t_hi = float(df["deletion_time"].max())
        span = opts.window_end - opts.window_start + opts.warmup_s
        self.compress = (self.t_hi - self.t_lo) / span
        ends_running = df["deletion_time"] >= self.t_hi
        # Pods alive at the trace's end (and the few from before its busy span) run all window.
        self.long_running = (ends_running & ((df["creation_time"] < self.t_lo) | df["qos"].isin(["LS", "Guaranteed"]))).to_numpy()
        self.records: list[dict] = df.assign(_i=np.arange(len(df))).to_dict("records")


def make_pods(fleet: Fleet, cluster: str, openb_dir: Path, opts: WorkloadOptions, trace: _Trace | None = None) -> list[PodSpec]:
    """All pods of one cluster over [start − warm-up, end): system pods first, then workloads."""
    trace = trace or _Trace(openb_dir, opts)
    nodes = fleet.of(cluster)
    spec = next(c for c in fleet.clusters if c.name == cluster)
    rng = np.random.default_rng([opts.seed, 202, spec.index])
    pods = _system_pods(cluster, nodes, opts, rng)
    pods += _workload_pods(cluster, nodes, trace, opts, rng)
    _make_names_unique(pods, rng)
    return pods


def _make_names_unique(pods: list[PodSpec], rng: np.random.Generator) -> None:
    """Random name suffixes can collide (two notebooks of one user); give the later pod a new one.

    Names stay unique per namespace over the whole window, so (snapshot, namespace, pod) is a key.
    """
    taken: set[tuple[str, str]] = set()
    for p in pods:
        while (p.namespace, p.name) in taken:
            if p.owner_kind == "Notebook":
                old = p.owner_name
                p.owner_name = old.rsplit("-", 1)[0] + "-" + _suffix(rng, 5)
                p.name = f"{p.owner_name}-0"
                p.labels = {k: (p.owner_name if v == old else v) for k, v in p.labels.items()}
                p.containers[0] = (p.owner_name, *p.containers[0][1:])
            elif p.owner_kind == "PyTorchJob":
                old = p.owner_name
                p.owner_name = old + _suffix(rng, 2)
                p.name = f"{p.owner_name}-master-0"
                p.labels = {k: (p.owner_name if v == old else v) for k, v in p.labels.items()}
            else:
                p.name = p.name[:-5] + _suffix(rng, 5)
        taken.add((p.namespace, p.name))


# -- system pods ----------------------------------------------------------------------------------
def _system_pods(cluster: str, nodes: list[Node], opts: WorkloadOptions, rng: np.random.Generator) -> list[PodSpec]:
    out: list[PodSpec] = []
    t0 = opts.window_start - opts.warmup_s

    def add(ns: str, name: str, kind: str, owner: str, app: str, cpu: float, mem_mib: float,
            node: int | None, created: float, end: float, prio: int, pclass: str | None, cont: str) -> None:
        mem = mem_mib * _MIB
        out.append(PodSpec(
            cluster=cluster, namespace=ns, name=name, uid=str(uuid.UUID(bytes=rng.bytes(16), version=4)),
            tier="system", owner_kind=kind, owner_name=owner,
            labels={"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": ns},
            annotations={}, containers=[(cont, {"cpu": cpu, "memory": mem}, {"memory": mem * 2})],
            priority=prio, priority_class=pclass, cls="system", cpu=cpu, memory=mem,
            created=created, duration=end - created, pin_node=node, activity=2,
            cpu_ratio=float(rng.uniform(0.1, 0.6)), mem_ratio=float(rng.uniform(0.4, 0.9)),
        ))

    for i, n in enumerate(nodes):
        start = max(t0, n.join_s)
        end = min(opts.window_end, n.leave_s)
        add("monitoring", f"node-exporter-{_suffix(rng, 5)}", "DaemonSet", "node-exporter", "node-exporter",
            0.1, 180, i, start, end, 2000001000, "system-node-critical", "node-exporter")
        if n.gpu_count:
            add("gpu-operator", f"nvidia-device-plugin-daemonset-{_suffix(rng, 5)}", "DaemonSet",
                "nvidia-device-plugin-daemonset", "nvidia-device-plugin", 0.05, 64, i, start, end,
                2000001000, "system-node-critical", "nvidia-device-plugin")
        if n.measured:
            add("gpu-operator", f"nvidia-dcgm-exporter-{_suffix(rng, 5)}", "DaemonSet", "nvidia-dcgm-exporter",
                "nvidia-dcgm-exporter", 0.1, 512, i, start, end, 2000001000, "system-node-critical",
                "nvidia-dcgm-exporter")
    rs = _suffix(rng, 10)
    for _k in range(2):
        add("kube-system", f"coredns-{rs}-{_suffix(rng, 5)}", "Deployment", "coredns", "coredns", 0.1, 70,
            None, t0, opts.window_end, 2000000000, "system-cluster-critical", "coredns")
    add("kube-system", f"metrics-server-{_suffix(rng, 10)}-{_suffix(rng, 5)}", "Deployment", "metrics-server",
        "metrics-server", 0.1, 200, None, t0, opts.window_end, 2000000000, "system-cluster-critical", "metrics-server")
    add("monitoring", "prometheus-k8s-0", "StatefulSet", "prometheus-k8s", "prometheus", 2.0, 8192,
        None, t0, opts.window_end, 0, None, "prometheus")
    for p in out[-4:]:
        p.cls = "cpu"  # placed by the scheduler like any CPU pod
        p.pin_node = None
    return out


# -- workload pods --------------------------------------------------------------------------------
def _capacities(nodes: list[Node], opts: WorkloadOptions) -> dict[str, float]:
    """Capacity-seconds in the window per scheduling class (MIG per profile)."""
    cap: dict[str, float] = {}
    for n in nodes:
        life = max(0.0, min(opts.window_end, n.leave_s) - max(opts.window_start, n.join_s))
        if n.mode == "whole":
            cap["whole"] = cap.get("whole", 0) + n.gpu_count * life
        elif n.mode == "timeslice":
            cap["timeslice"] = cap.get("timeslice", 0) + n.gpu_count * TIMESLICE_REPLICAS * life
        elif n.mode == "fractional":
            cap["fractional"] = cap.get("fractional", 0) + n.gpu_count * 1000 * life
        elif n.mode == "mig":
            for inst in n.mig_instances:
                cap["mig:" + inst.profile] = cap.get("mig:" + inst.profile, 0) + life
        elif n.mode == "cpu":
            cap["cpu"] = cap.get("cpu", 0) + (n.alloc_cpu - 1.0) * life
    return cap


def _mig_profile_for(milli: int) -> str | None:
    for name, prof in sorted(MIG_PROFILES.items(), key=lambda kv: kv[1].gpu_equiv):
        if milli / 1000 <= prof.gpu_equiv + 1e-9:
            return name
    return None


def _workload_pods(cluster: str, nodes: list[Node], trace: _Trace, opts: WorkloadOptions, rng: np.random.Generator) -> list[PodSpec]:
    df = trace.df
    sharing = (df["gpu_milli"] > 0) & (df["gpu_milli"] < 1000)
    max_whole = max((n.gpu_count for n in nodes if n.mode == "whole"), default=0)
    pools: dict[str, pd.DataFrame] = {
        "whole": df[(df["num_gpu"] >= 1) & (df["gpu_milli"] >= 1000) & (df["num_gpu"] <= max_whole)],
        "timeslice": df[sharing & (df["gpu_milli"] <= 470)],
        "fractional": df[sharing],
        "cpu": df[df["num_gpu"] == 0],
    }
    profiles = df["gpu_milli"].map(lambda m: _mig_profile_for(int(m)) if 0 < m < 1000 else None)
    for name in MIG_PROFILES:
        pools["mig:" + name] = df[sharing & (profiles == name)]
    cap = _capacities(nodes, opts)
    window = opts.window_end - opts.window_start
    out: list[PodSpec] = []
    deployments: _Deployments = {}  # serving pods of one shape in one namespace form a Deployment
    for key in sorted(cap):
        rows = pools.get(key)
        if rows is None or rows.empty or cap[key] <= 0:
            continue
        target = opts.target_allocation * cap[key]
        demand = 0.0
        batch: list[PodSpec] = []
        idx = df.index.get_indexer(rows.index)
        # Multi-GPU rows are 1% of the trace; weighting them up makes distributed training visible.
        weight = np.where(rows["num_gpu"].to_numpy() > 1, _MULTI_GPU_WEIGHT, 1.0)
        cum = np.cumsum(weight) / weight.sum()
        while demand < target and len(batch) < opts.max_pods_per_mode:
            r = trace.records[idx[min(len(idx) - 1, int(np.searchsorted(cum, rng.random(), side="right")))]]
            pod = _pod_from_row(cluster, key, r, trace, opts, rng, deployments)
            units = {"whole": pod.n_gpu, "timeslice": 1, "fractional": pod.milli, "cpu": pod.cpu}.get(key, 1)
            overlap = max(0.0, min(opts.window_end, pod.created + pod.duration) - max(opts.window_start, pod.created))
            demand += units * overlap
            batch.append(pod)
        _rescale_cpu_memory(batch, [n for n in nodes if _mode_of(key) == n.mode], window, key)
        out += batch
    out.sort(key=lambda p: p.created)
    return out


def _mode_of(key: str) -> str:
    return key.split(":")[0]


def _rescale_cpu_memory(pods: list[PodSpec], nodes: list[Node], window: float, key: str) -> None:
    """Scale the trace's CPU/memory requests to the pool's instance types.

    openb's nodes carry 50-100 cores per GPU; cloud GPU instances carry 3-24. Without this, CPU
    would run out long before GPUs do on every sharing pool.
    """
    if not pods or not nodes or key == "cpu":
        return
    cap_cpu = sum(n.alloc_cpu - 0.5 for n in nodes) * window
    cap_mem = sum(n.alloc_memory - 1.5 * (1 << 30) for n in nodes) * window
    used_cpu = sum(p.cpu * max(0.0, min(p.duration, window)) for p in pods)
    used_mem = sum(p.memory * max(0.0, min(p.duration, window)) for p in pods)
    f_cpu = min(1.0, 0.5 * cap_cpu / used_cpu) if used_cpu else 1.0
    f_mem = min(1.0, 0.5 * cap_mem / used_mem) if used_mem else 1.0
    max_cpu = max(n.alloc_cpu for n in nodes) - 1.0
    max_mem = max(n.alloc_memory for n in nodes) - 2 * (1 << 30)
    for p in pods:
        main, req, lim = p.containers[0]
        gpu_share = p.n_gpu / max(1, max(n.gpu_count for n in nodes)) if p.cls == "whole" else 0.5
        cpu = min(max(0.1, round(req.get("cpu", 0.0) * f_cpu, 1)), max(0.5, round(max_cpu * gpu_share, 1)))
        mem = req.get("memory", 0.0)
        if mem:
            mem = min(max(256 * _MIB, round(mem * f_mem / (256 * _MIB)) * 256 * _MIB), max_mem * gpu_share)
            mem = float(int(mem / _MIB) * _MIB)
        req, lim = dict(req), dict(lim)
        for r, v in (("cpu", cpu), ("memory", mem)):
            if r in lim:  # keep the limit's ratio to the request (2x for notebooks, equal for serving)
                lim[r] = round(lim[r] * v / req[r], 3) if req.get(r) else v
            if r in req:
                req[r] = v
        p.containers[0] = (main, req, lim)
        p.cpu = sum(c[1].get("cpu", 0.0) for c in p.containers)
        p.memory = sum(c[1].get("memory", 0.0) for c in p.containers)


def _tier_for(row: dict, key: str, rng: np.random.Generator) -> str:
    ls = row["qos"] in ("LS", "Guaranteed")
    if key == "cpu":
        return "cpu-serving" if ls else "cpu-batch"
    if ls:
        return "serving"
    r = rng.random()
    if key == "whole":
        if r < 0.7:
            return "training"
        return "batch" if r < 0.88 or int(row["num_gpu"]) > 1 else "notebook"
    return "notebook" if r < 0.4 else ("training" if r < 0.7 else "batch")


_Deployments = dict[tuple[str, str, tuple], tuple[str, str, str, int]]


def _pod_from_row(cluster: str, key: str, row: dict, trace: _Trace, opts: WorkloadOptions,
                  rng: np.random.Generator, deployments: _Deployments) -> PodSpec:
    tier_key = _tier_for(row, key, rng)
    ns = _pick_namespace(tier_key, rng)
    tier = {"cpu-serving": "serving", "cpu-batch": "batch", "notebook": "interactive"}.get(tier_key, tier_key)
    cpu = float(row["cpu_milli"]) / 1000
    mem = float(row["memory_mib"]) * _MIB
    mode = _mode_of(key)
    gpu_req: dict[str, float] = {}
    annotations: dict[str, str] = {}
    n_gpu, milli, profile, equiv = 0, 0, None, 0.0
    if mode == "whole":
        n_gpu = int(row["num_gpu"])
        gpu_req = {"nvidia.com/gpu": float(n_gpu)}
        equiv = float(n_gpu)
    elif mode == "timeslice":
        milli = 1000 // TIMESLICE_REPLICAS
        gpu_req = {"nvidia.com/gpu": 1.0}
        equiv = 1 / TIMESLICE_REPLICAS
    elif mode == "fractional":
        milli = int(row["gpu_milli"])
        gpu_req = {"nvidia.com/gpu.shared": 1.0}
        annotations["gpufinops.io/gpu-milli"] = str(milli)
        equiv = milli / 1000
    elif mode == "mig":
        profile = key.split(":", 1)[1]
        gpu_req = {MIG_PROFILES[profile].resource: 1.0}
        equiv = MIG_PROFILES[profile].gpu_equiv
    # -- lifetime: the trace's busy span compressed into the window, with plausible floors
    long_running = bool(trace.long_running[row["_i"]])
    t0 = opts.window_start - opts.warmup_s
    if long_running:
        created = t0 + float(rng.uniform(0, 3600))
        duration = math.inf
    else:
        pos = (float(row["creation_time"]) - trace.t_lo) / trace.compress
        jitter = float(rng.uniform(-6, 6)) * 3600
        span = opts.window_end - t0
        created = t0 + (pos + jitter) % span
        created = float(int(created))
        duration = max(_MIN_LIFETIME_S[tier_key], (float(row["deletion_time"]) - float(row["creation_time"])) / trace.compress)
        if tier_key in ("serving", "cpu-serving"):
            duration *= float(rng.uniform(1, 4))  # replicas outlive their floor by a spread
    duration = min(duration, opts.window_end - created)
    # -- owner, names, labels
    labels: dict[str, str] = {}
    sfx = _suffix(rng, 5)
    containers: list[tuple[str, dict[str, float], dict[str, float]]] = []
    priority, pclass = 0, None
    if tier_key in ("serving", "cpu-serving"):
        shape = (row["cpu_milli"], row["memory_mib"], row["num_gpu"], row["gpu_milli"], key)
        dkey = (cluster, ns.name, shape)
        if dkey not in deployments:
            k = sum(1 for d in deployments if d[0] == cluster and d[1] == ns.name)
            names = ns.deployments if tier_key == "serving" and ns.deployments else _CPU_SERVING_NAMES
            base = names[k % len(names)] + ("" if k < len(names) else f"-v{k // len(names) + 1}")
            kind = "InferenceService" if (tier_key == "serving" and _h(cluster, ns.name, base) % 10 < 3) else "Deployment"
            deployments[dkey] = (base, kind, _suffix(rng, 10), k)
        base, kind, rs, k = deployments[dkey]
        name = f"{base}-predictor-{rs}-{sfx}" if kind == "InferenceService" else f"{base}-{rs}-{sfx}"
        labels = {"app": base, "pod-template-hash": rs}
        if kind == "InferenceService":
            labels["serving.kserve.io/inferenceservice"] = base
        if ns.name == "ml-serving" and k % 3 == 0:
            labels.update(_POD_TEAM_OVERRIDE)
        owner_kind, owner_name = kind, base
        cname = "kserve-container" if kind == "InferenceService" else "server"
        containers.append((cname, {"cpu": cpu, "memory": mem, **gpu_req}, {"cpu": cpu, "memory": mem, **gpu_req}))
        if ns.sidecar:
            side = 0.1, 128 * _MIB
            containers.append(("istio-proxy", {"cpu": side[0], "memory": side[1]}, {"cpu": side[0], "memory": side[1]}))
        if tier_key == "serving":
            priority, pclass = 100000, "serving-high"
            # the warm-up lead time a scale-to-zero window leaves before traffic returns: container start
            # plus loading the model, about 1 s per GiB of the server's memory (no rng: the fleet stays as it was)
            annotations["gpufinops.io/warmup-seconds"] = str(int(60 + mem / (1 << 30)))
    elif tier_key == "training":
        base = _TRAIN_NAMES[int(rng.integers(len(_TRAIN_NAMES)))]
        job = f"{base}-{_suffix(rng, 4)}{int(rng.integers(100, 999))}"
        r = rng.random()
        if r < 0.45:
            owner_kind, name, cname = "PyTorchJob", f"{job}-master-0", "pytorch"
            labels = {"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": "master"}
        elif r < 0.8:
            owner_kind, name, cname = "Job", f"{job}-{sfx}", "trainer"
            labels = {"batch.kubernetes.io/job-name": job, "job-name": job}
        else:
            owner_kind, name, cname = "RayJob", f"{job}-raycluster-{_suffix(rng, 5)}-gpu-group-worker-{sfx}", "ray-worker"
            labels = {"ray.io/cluster": f"{job}-raycluster", "ray.io/node-type": "worker"}
        owner_name = job
        if rng.random() < 0.4:
            annotations["gpufinops.io/checkpointed"] = "true"
        containers.append((cname, {"cpu": cpu, "memory": mem, **gpu_req}, {"memory": mem, **gpu_req}))
        priority, pclass = 1000, "training"
    elif tier_key == "notebook":
        user = _USERS[int(rng.integers(len(_USERS)))]
        nb = f"{user}-nb-{_suffix(rng, 4)}"
        owner_kind, owner_name, name = "Notebook", nb, f"{nb}-0"
        labels = {"app": "jupyter", "notebook-name": nb, "statefulset": nb}
        containers.append((nb, {"cpu": cpu, "memory": mem, **gpu_req}, {"memory": mem * 2, **gpu_req}))
    else:  # batch / cpu-batch
        names = _BATCH_NAMES if tier_key == "batch" else _CPU_BATCH_NAMES
        base = names[int(rng.integers(len(names)))]
        if rng.random() < 0.5:
            owner_kind, owner_name = "CronJob", base
            name = f"{base}-{int(created // 60)}-{sfx}"
        else:
            owner_kind, owner_name = "Job", f"{base}-{_suffix(rng, 5)}"
            name = f"{owner_name}-{sfx}"
        labels = {"job-name": name.rsplit("-", 1)[0]}
        containers.append(("main", {"cpu": cpu, "memory": mem, **gpu_req}, dict(gpu_req)))
        priority, pclass = 100, "batch-low"
    for c in containers:  # a zero memory request in the trace means "not set"
        for d in (c[1], c[2]):
            if d.get("memory") == 0:
                del d["memory"]
    labels["app.kubernetes.io/managed-by"] = "gpufinops-demo"
    activity = {"serving": 0, "training": 1, "batch": 4, "notebook": 3}.get(tier_key, 2)
    if rng.random() < _IDLE_SHARE.get(tier_key, 0.0):
        activity = 2
    burstable = "cpu" not in containers[0][2]
    cpu_ratio = float(rng.uniform(0.6, 1.4) if burstable and tier_key in ("training", "batch", "cpu-batch") else rng.uniform(0.15, 0.7))
    mem_cap = 1.25 if "memory" not in containers[0][2] else 0.95
    mem_ratio = float(min(mem_cap, rng.uniform(0.4, 1.2)))
    return PodSpec(
        cluster=cluster, namespace=ns.name, name=name, uid=str(uuid.UUID(bytes=rng.bytes(16), version=4)),
        tier=tier, owner_kind=owner_kind, owner_name=owner_name, labels=labels, annotations=annotations,
        containers=containers, priority=priority, priority_class=pclass,
        cls={"whole": "whole", "timeslice": "timeslice", "fractional": "fractional", "cpu": "cpu"}.get(mode, "mig"),
        n_gpu=n_gpu, mig_profile=profile, milli=milli, gpu_equiv=equiv,
        cpu=sum(c[1].get("cpu", 0.0) for c in containers), memory=sum(c[1].get("memory", 0.0) for c in containers),
        created=created, duration=duration, activity=activity, cpu_ratio=cpu_ratio, mem_ratio=mem_ratio,
    )


def namespace_objects() -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(name, labels, annotations) of every namespace the demo makes."""
    out = []
    for ns in NAMESPACES:
        labels = {"kubernetes.io/metadata.name": ns.name}
        ann: dict[str, str] = {}
        if ns.attribution == "labels":
            labels.update({"team": ns.team or "", "tenant": ns.tenant or ""})
        elif ns.attribution == "annotations":
            ann.update({"team": ns.team or "", "tenant": ns.tenant or ""})
        out.append((ns.name, labels, ann))
    for name in SYSTEM_NAMESPACES:
        out.append((name, {"kubernetes.io/metadata.name": name, "team": "sre", "tenant": "platform"}, {}))
    return out
