"""Kubernetes objects -> landing rows (ingest/k8s/mapping.py, providers.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpufinops.errors import InputError
from ingest.k8s.mapping import OwnerIndex, namespace_row, node_row, parse_time, pod_row
from ingest.k8s.providers import capacity_type_of, node_pool_of, provider_of
from ingest.k8s.snapshot import Snapshot, snapshot_tables
from ingest.schema import TABLES

FIXTURES = Path(__file__).parent / "fixtures" / "k8s"
TS = datetime(2026, 11, 28, 8, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def dump_items() -> list[dict[str, Any]]:
    return json.loads((FIXTURES / "dump-eks-gke-aks.json").read_text())["items"]


def _by(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(i for i in items if i["kind"] == kind and i["metadata"]["name"] == name)


def _owner_index(items: list[dict[str, Any]]) -> OwnerIndex:
    return OwnerIndex(i for i in items if i["kind"] not in ("Pod", "Node", "Namespace"))


# -- capacity type, pool, provider ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"eks.amazonaws.com/capacityType": "ON_DEMAND"}, "on_demand"),
        ({"eks.amazonaws.com/capacityType": "SPOT"}, "spot"),
        ({"eks.amazonaws.com/capacityType": "CAPACITY_BLOCK"}, "reserved"),
        ({"karpenter.sh/capacity-type": "on-demand"}, "on_demand"),
        ({"karpenter.sh/capacity-type": "spot"}, "spot"),
        ({"karpenter.sh/capacity-type": "reserved"}, "reserved"),
        ({"cloud.google.com/gke-spot": "true"}, "spot"),
        ({"cloud.google.com/gke-preemptible": "true"}, "spot"),
        ({"cloud.google.com/gke-provisioning": "standard"}, "on_demand"),
        ({"cloud.google.com/gke-provisioning": "spot"}, "spot"),
        ({"kubernetes.azure.com/scalesetpriority": "spot"}, "spot"),
        ({"kubernetes.azure.com/scalesetpriority": "regular"}, "on_demand"),
        # Karpenter knows better than the node group label it runs under.
        ({"karpenter.sh/capacity-type": "spot", "eks.amazonaws.com/capacityType": "ON_DEMAND"}, "spot"),
        # "false" says nothing about spot; nothing else is known, so the list price applies.
        ({"cloud.google.com/gke-spot": "false"}, "on_demand"),
        ({}, "on_demand"),
    ],
)
def test_capacity_type_per_provider(labels: dict[str, str], expected: str) -> None:
    assert capacity_type_of(labels) == expected


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"eks.amazonaws.com/nodegroup": "gpu-a100"}, "gpu-a100"),
        ({"karpenter.sh/nodepool": "gpu-spot"}, "gpu-spot"),
        ({"karpenter.sh/provisioner-name": "legacy"}, "legacy"),
        ({"cloud.google.com/gke-nodepool": "l4-spot"}, "l4-spot"),
        ({"kubernetes.azure.com/agentpool": "a100mig", "agentpool": "other"}, "a100mig"),
        ({"agentpool": "old-aks"}, "old-aks"),
        ({}, None),
    ],
)
def test_node_pool(labels: dict[str, str], expected: str | None) -> None:
    assert node_pool_of(labels) == expected


@pytest.mark.parametrize(
    ("provider_id", "labels", "expected"),
    [
        ("aws:///us-east-1a/i-0a1b2c3d", {}, "aws"),
        ("gce://proj/us-central1-a/gke-x", {}, "gcp"),
        ("azure:///subscriptions/x/resourceGroups/y", {}, "azure"),
        ("kind://docker/kind/kind-control-plane", {}, "unknown"),
        (None, {"cloud.google.com/gke-nodepool": "p"}, "gcp"),
        (None, {}, "unknown"),
    ],
)
def test_provider(provider_id: str | None, labels: dict[str, str], expected: str) -> None:
    assert provider_of(provider_id, labels) == expected


# -- nodes ----------------------------------------------------------------------------------------
def test_eks_a100_node(dump_items: list[dict[str, Any]]) -> None:
    row = node_row(_by(dump_items, "Node", "ip-10-0-12-34.ec2.internal"), TS)
    assert (row["provider"], row["instance_type"], row["region"], row["zone"]) == ("aws", "p4d.24xlarge", "us-east-1", "us-east-1a")
    assert (row["capacity_type"], row["node_pool"]) == ("on_demand", "gpu-a100")
    assert (row["gpu_product"], row["gpu_count"], row["gpu_memory_mib"], row["gpu_replicas"]) == ("NVIDIA-A100-SXM4-40GB", 8, 40960, None)
    assert row["capacity"]["cpu"] == 96.0
    assert row["allocatable"]["cpu"] == pytest.approx(95.69)
    assert row["capacity"]["memory"] == 1176937920 * 1024.0
    assert row["capacity"]["vpc.amazonaws.com/efa"] == 4.0  # every resource kept, verbatim
    assert row["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert row["unschedulable"] is False
    assert row["provider_id"] == "aws:///us-east-1a/i-0a1b2c3d4e5f60718"


def test_time_sliced_node_counts_physical_gpus(dump_items: list[dict[str, Any]]) -> None:
    node = _by(dump_items, "Node", "ip-10-0-40-7.ec2.internal")
    row = node_row(node, TS)
    assert row["capacity"]["nvidia.com/gpu"] == 16.0  # 4 GPUs x 4 replicas advertised
    assert (row["gpu_count"], row["gpu_replicas"], row["capacity_type"], row["node_pool"]) == (4, 4, "spot", "gpu-spot")
    # Without the GFD count label the replicas are divided out of the advertised capacity.
    bare = json.loads(json.dumps(node))
    del bare["metadata"]["labels"]["nvidia.com/gpu.count"]
    assert node_row(bare, TS)["gpu_count"] == 4
    # renameByDefault: the shared replicas are advertised as nvidia.com/gpu.shared instead
    status = bare["status"]
    for m in (status["capacity"], status["allocatable"]):
        m["nvidia.com/gpu.shared"] = m.pop("nvidia.com/gpu")
    row = node_row(bare, TS)
    assert (row["gpu_count"], row["capacity"]["nvidia.com/gpu.shared"]) == (4, 16.0)


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [({"amd.com/gpu": "8"}, 8), ({"aws.amazon.com/neuron": "16"}, 16), ({"cpu": "8"}, 0)],
)
def test_gpu_count_of_other_accelerators(capacity: dict[str, str], expected: int) -> None:
    node = {"metadata": {"name": "n"}, "status": {"capacity": capacity}}
    assert node_row(node, TS)["gpu_count"] == expected


def test_mig_node(dump_items: list[dict[str, Any]]) -> None:
    row = node_row(_by(dump_items, "Node", "aks-a100mig-31245678-vmss000000"), TS)
    assert (row["provider"], row["node_pool"], row["capacity_type"]) == ("azure", "a100mig", "on_demand")
    assert (row["mig_config"], row["mig_strategy"], row["gpu_count"]) == ("all-1g.10gb", "mixed", 1)
    assert row["capacity"]["nvidia.com/mig-1g.10gb"] == 7.0
    assert row["capacity"]["nvidia.com/gpu"] == 0.0


def test_gke_node_with_legacy_labels_and_no_gfd(dump_items: list[dict[str, Any]]) -> None:
    row = node_row(_by(dump_items, "Node", "gke-prod-l4-spot-3f9a2b1c-x7kq"), TS)
    assert (row["provider"], row["instance_type"], row["region"], row["zone"]) == ("gcp", "g2-standard-8", "us-central1", "us-central1-a")
    assert (row["capacity_type"], row["gpu_count"], row["gpu_product"]) == ("spot", 1, None)
    assert len(row["taints"]) == 2


def test_cordoned_cpu_node(dump_items: list[dict[str, Any]]) -> None:
    row = node_row(_by(dump_items, "Node", "ip-10-0-3-21.ec2.internal"), TS)
    assert row["unschedulable"] is True
    assert row["gpu_count"] == 0
    assert row["taints"][0] == {"key": "node.kubernetes.io/unschedulable", "value": None, "effect": "NoSchedule"}


def test_bad_node_label_names_node_and_label() -> None:
    node = {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.count": "eight"}}, "status": {}}
    with pytest.raises(InputError, match=r"Node n1 label nvidia.com/gpu.count.*'eight'"):
        node_row(node, TS)


# -- pods and owners ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("namespace", "pod", "owner"),
    [
        ("serving", "llm-api-7d9f8b6c5d-x2k4p", ("Deployment", "llm-api")),  # ReplicaSet -> Deployment
        ("team-a", "nightly-eval-29412345-7wzvq", ("CronJob", "nightly-eval")),  # Job -> CronJob
        ("team-a", "batch-infer-kx8pl", ("Job", "batch-infer")),  # a Job nobody owns
        ("ml-research", "bert-finetune-master-0", ("PyTorchJob", "bert-finetune")),  # custom resource, direct
        ("ml-research", "rayjob-sample-raycluster-9xk2p-head-7jq4c", ("RayJob", "rayjob-sample")),  # via a listed CR
        ("gpu-operator", "nvidia-dcgm-exporter-8xk2m", ("DaemonSet", "nvidia-dcgm-exporter")),
        ("default", "debug-shell", (None, None)),
    ],
)
def test_top_level_owner(dump_items: list[dict[str, Any]], namespace: str, pod: str, owner: tuple[str | None, str | None]) -> None:
    obj = _by(dump_items, "Pod", pod)
    row = pod_row(obj, TS, _owner_index(dump_items))
    assert (row["namespace"], row["pod"]) == (namespace, pod)
    assert (row["owner_kind"], row["owner_name"]) == owner


def test_unlisted_owner_stays_first_controller_reference(dump_items: list[dict[str, Any]]) -> None:
    obj = _by(dump_items, "Pod", "llm-api-7d9f8b6c5d-x2k4p")
    row = pod_row(obj, TS, OwnerIndex())
    assert (row["owner_kind"], row["owner_name"]) == ("ReplicaSet", "llm-api-7d9f8b6c5d")


def _ref(kind: str, name: str, uid: str, controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": "x/v1", "kind": kind, "name": name, "uid": uid, "controller": controller}


def test_owner_chain_rules() -> None:
    index = OwnerIndex(
        [
            {"kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "ns", "uid": "u-new",
                                                "ownerReferences": [_ref("Deployment", "d", "u-d")]}},
            # a cycle must not hang
            {"kind": "A", "metadata": {"name": "a", "namespace": "ns", "uid": "ua", "ownerReferences": [_ref("B", "b", "ub")]}},
            {"kind": "B", "metadata": {"name": "b", "namespace": "ns", "uid": "ub", "ownerReferences": [_ref("A", "a", "ua")]}},
            # same name in another namespace must not be used
            {"kind": "Job", "metadata": {"name": "j", "namespace": "other", "uid": "uj",
                                         "ownerReferences": [_ref("CronJob", "c", "uc")]}},
        ]
    )
    # The listed ReplicaSet was recreated (other uid): its Deployment is not our pod's owner.
    assert index.top_owner("ns", {"ownerReferences": [_ref("ReplicaSet", "rs", "u-old")]}) == ("ReplicaSet", "rs")
    assert index.top_owner("ns", {"ownerReferences": [_ref("ReplicaSet", "rs", "u-new")]}) == ("Deployment", "d")
    assert index.top_owner("ns", {"ownerReferences": [_ref("A", "a", "ua")]}) in {("A", "a"), ("B", "b")}
    assert index.top_owner("ns", {"ownerReferences": [_ref("Job", "j", "uj")]}) == ("Job", "j")
    # The controller reference wins over others; without one, the first reference is used.
    refs = [_ref("ConfigMap", "cm", "x", controller=False), _ref("ReplicaSet", "rs", "u-new")]
    assert index.top_owner("ns", {"ownerReferences": refs}) == ("Deployment", "d")
    assert index.top_owner("ns", {"ownerReferences": [_ref("Thing", "t", "x", controller=False)]}) == ("Thing", "t")


def test_pod_fields(dump_items: list[dict[str, Any]]) -> None:
    row = pod_row(_by(dump_items, "Pod", "whisper-5c8d7f9b4-q9r2t"), TS, _owner_index(dump_items))
    assert row["node"] == "aks-a100mig-31245678-vmss000000"
    assert (row["phase"], row["qos_class"], row["priority"], row["priority_class"]) == ("Running", "Burstable", 0, None)
    assert row["containers"] == [
        {"name": "whisper", "requests": {"cpu": 1.5, "memory": 6 * 2.0**30, "nvidia.com/mig-1g.10gb": 1.0},
         "limits": {"cpu": 2.0, "memory": 6 * 2.0**30, "nvidia.com/mig-1g.10gb": 1.0}}
    ]
    assert [c["name"] for c in row["init_containers"]] == ["fetch-model", "warmup"]
    assert row["init_containers"][0]["requests"] == {"cpu": 0.5, "memory": 2.0**30}
    assert row["init_containers"][1]["limits"] == {}
    assert row["start_time"] == TS
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "value": None, "effect": "NoSchedule"} in row["tolerations"]
    assert row["labels"]["app"] == "whisper"


def test_pending_pod_has_no_node_or_start(dump_items: list[dict[str, Any]]) -> None:
    row = pod_row(_by(dump_items, "Pod", "batch-infer-kx8pl"), TS, _owner_index(dump_items))
    assert (row["phase"], row["node"], row["start_time"]) == ("Pending", None, None)
    assert row["containers"][0]["requests"]["nvidia.com/gpu"] == 2.0


def test_serving_pod_priority_and_selector(dump_items: list[dict[str, Any]]) -> None:
    row = pod_row(_by(dump_items, "Pod", "llm-api-7d9f8b6c5d-x2k4p"), TS, _owner_index(dump_items))
    assert (row["priority"], row["priority_class"], row["qos_class"]) == (1000000, "serving-high", "Guaranteed")
    assert row["node_selector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}


def _affinity_pod(affinity: Any) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": "p", "namespace": "ml", "uid": "u"},
            "spec": {"containers": [], "affinity": affinity}}


def test_required_node_affinity_is_flattened_per_term() -> None:
    gpu = "nvidia.com/gpu.product"
    affinity = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": gpu, "operator": "In", "values": ["V100M32", "V100M16", "V100M16"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "Exists"}], "matchFields": [{"key": "x"}]},
        ]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
    }}
    row = pod_row(_affinity_pod(affinity), TS, OwnerIndex())
    assert row["required_node_affinity"] == [
        {"term": 0, "key": gpu, "operator": "In", "label_values": ["V100M16", "V100M32"]},
        {"term": 1, "key": "zone", "operator": "Exists", "label_values": []},
    ]
    assert pod_row(_affinity_pod(None), TS, OwnerIndex())["required_node_affinity"] == []


def test_bad_node_affinity_names_the_pod_and_term() -> None:
    bad = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "k", "operator": "In", "values": "a"}]}]}}}
    with pytest.raises(InputError, match=r"Pod ml/p.*nodeSelectorTerms\[0\].matchExpressions\[0\].values"):
        pod_row(_affinity_pod(bad), TS, OwnerIndex())


def test_bad_pod_quantity_names_pod_container_and_value(dump_items: list[dict[str, Any]]) -> None:
    obj = json.loads(json.dumps(_by(dump_items, "Pod", "llm-api-7d9f8b6c5d-x2k4p")))
    obj["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64GB"
    with pytest.raises(InputError) as err:
        pod_row(obj, TS, OwnerIndex())
    msg = str(err.value)
    assert "Pod serving/llm-api-7d9f8b6c5d-x2k4p" in msg and "server" in msg and "'64GB'" in msg


def test_namespace_row(dump_items: list[dict[str, Any]]) -> None:
    row = namespace_row(_by(dump_items, "Namespace", "team-a"), TS)
    assert row["labels"]["team"] == "vision"
    assert row["annotations"] == {"gpufinops.io/tenant": "acme"}


def test_parse_time() -> None:
    assert parse_time("2026-11-28T08:00:00Z") == TS
    assert parse_time("2026-11-28T09:00:00.5+01:00") == TS.replace(microsecond=500000)
    assert parse_time(None) is None
    with pytest.raises(InputError, match="not-a-time"):
        parse_time("not-a-time", where="Pod a/b status.startTime")


def test_snapshot_tables_match_landing_schema(dump_items: list[dict[str, Any]]) -> None:
    snap = Snapshot(taken_at=TS.replace(microsecond=123456), origin="test")
    for i, item in enumerate(dump_items):
        snap.add(item["kind"], item, f"item {i}")
    tables = snapshot_tables(snap)
    assert {n: t.num_rows for n, t in tables.items()} == {"k8s_nodes": 6, "k8s_pods": 9, "k8s_namespaces": 6}
    for name, table in tables.items():
        assert table.schema.equals(TABLES[name].schema)
        # the snapshot time is truncated to the second: the lake names files per second
        assert set(table.column("snapshot_ts").to_pylist()) == {TS}
    pods = tables["k8s_pods"]
    assert pods.column("containers").type == TABLES["k8s_pods"].schema.field("containers").type
    assert isinstance(pods, pa.Table)


def test_duplicate_pod_in_one_snapshot_is_an_error(dump_items: list[dict[str, Any]]) -> None:
    snap = Snapshot(taken_at=TS, origin="dump file x.json")
    pod = _by(dump_items, "Pod", "debug-shell")
    snap.add("Pod", pod, "item 0")
    snap.add("Pod", pod, "item 1")
    with pytest.raises(InputError, match="more than once"):
        snapshot_tables(snap)
