"""The demo cluster: Kubernetes objects built from a lake's latest snapshot, served over HTTP, and the
``gpufinops demo-cluster`` command (kubeconfig, instructions)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from test_recommender_loader import build_world
from typer.testing import CliRunner

from controller.crds import NOTEBOOK_STOPPED
from controller.kube import KubeClient
from gpufinops.errors import ConfigError, InputError
from gpufinops.settings import Settings
from testsupport.demo_cluster import (
    DemoCluster,
    build_demo_cluster,
    build_demo_clusters,
    lake_clusters,
    start_demo_servers,
    stop_demo_servers,
)
from testsupport.fakeapi import validate_object


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build_world(tmp_path_factory.mktemp("demo_cluster") / "home")


@pytest.fixture(scope="module")
def c1(world: Settings) -> DemoCluster:
    return build_demo_cluster(world.lake_dir, "c1")


def _one(c: DemoCluster, kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in c.objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def test_every_object_is_valid_kubernetes(c1: DemoCluster) -> None:
    assert c1.counts == {"Deployment": 1, "HorizontalPodAutoscaler": 1, "Job": 1, "Node": 2, "Pod": 4,
                         "PyTorchJob": 1}
    for obj in c1.objects:
        validate_object(obj, "1.30")


def test_workloads_carry_the_pods_resources(c1: DemoCluster) -> None:
    etl = _one(c1, "Job", "etl")
    (container,) = etl["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
                                      "limits": {"memory": "32Gi", "nvidia.com/gpu": "1"}}
    assert etl["spec"]["suspend"] is False
    train = _one(c1, "PyTorchJob", "train")  # served as itself, at its real path
    assert train["apiVersion"] == "kubeflow.org/v1" and train["spec"]["runPolicy"]["suspend"] is False
    master = train["spec"]["pytorchReplicaSpecs"]["Master"]
    assert master["replicas"] == 1 and master["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert not any(o["kind"] == "Job" and o["metadata"]["name"] == "train" for o in c1.objects)
    api = _one(c1, "Deployment", "api")
    assert api["spec"]["replicas"] == 2
    sel = api["spec"]["selector"]["matchLabels"]
    assert sel and all(api["spec"]["template"]["metadata"]["labels"][k] == v for k, v in sel.items())
    hpa = _one(c1, "HorizontalPodAutoscaler", "api")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}
    assert hpa["spec"]["minReplicas"] == 2 <= hpa["spec"]["maxReplicas"]


def test_nodes_and_pods(c1: DemoCluster) -> None:
    n1 = _one(c1, "Node", "n1")
    assert n1["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert n1["metadata"]["labels"]["karpenter.sh/capacity-type"] == "on-demand"
    assert n1["status"]["allocatable"]["nvidia.com/gpu"] == "8" and n1["status"]["capacity"]["memory"] == "1024Gi"
    pod = _one(c1, "Pod", "etl-1")
    assert pod["spec"]["nodeName"] == "n1"
    (owner,) = pod["metadata"]["ownerReferences"]
    assert owner["kind"] == "Job" and owner["name"] == "etl" and owner["uid"] == _one(c1, "Job", "etl")["metadata"]["uid"]
    api_pod = _one(c1, "Pod", "api-7d9f-x")
    assert api_pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    (train_owner,) = _one(c1, "Pod", "train-0")["metadata"]["ownerReferences"]
    assert (train_owner["apiVersion"], train_owner["kind"], train_owner["uid"]) == (
        "kubeflow.org/v1", "PyTorchJob", _one(c1, "PyTorchJob", "train")["metadata"]["uid"])


def test_older_workloads_on_request_and_errors(world: Settings, tmp_path: Path) -> None:
    assert lake_clusters(world.lake_dir) == ["c1"]
    wider = build_demo_cluster(world.lake_dir, "c1", workload_days=3)
    assert wider.counts == build_demo_cluster(world.lake_dir, "c1").counts  # every workload is running now
    with pytest.raises(InputError, match="cluster 'nope'.*c1"):
        build_demo_cluster(world.lake_dir, "nope")
    with pytest.raises(InputError, match="no Kubernetes snapshot"):
        build_demo_clusters(tmp_path / "lake")


def test_served_over_http_and_a_busy_port_is_named(c1: DemoCluster) -> None:
    servers = start_demo_servers([c1], port=0)
    try:
        kube = KubeClient(servers[0].api.api_client())
        assert [n["metadata"]["name"] for n in kube.nodes()] == ["n1", "n2"]
        assert sorted(p["metadata"]["name"] for p in kube.pods_on_node("n2")) == ["api-7d9f-x", "api-7d9f-y"]
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            with pytest.raises(ConfigError, match=f"127.0.0.1:{busy.getsockname()[1]}"):
                start_demo_servers([c1], port=busy.getsockname()[1])
    finally:
        stop_demo_servers(servers)


def test_cli_writes_the_kubeconfig_and_says_how_to_use_it(world: Settings) -> None:
    from cli.commands import demo_cluster

    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = world

    demo_cluster.register(app)
    res = CliRunner().invoke(app, ["demo-cluster", "--once", "--port", "0"])
    assert res.exit_code == 0, res.output
    kc = world.home / "demo-kubeconfig.yaml"
    doc = yaml.safe_load(kc.read_text())
    assert doc["current-context"] == "c1" and doc["contexts"][0]["name"] == "c1"
    assert doc["clusters"][0]["cluster"]["server"].startswith("http://127.0.0.1:")
    out = " ".join(res.output.split())
    assert f"changes apply ID --kubeconfig {kc} --context c1" in out
    assert f"{{kind: k8s, cluster: c1, kubeconfig: {kc}, context: c1}}" in out


def _row(kind: str, name: str, pod: str, replicas: int, containers: list[dict[str, Any]],
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"owner_kind": kind, "owner_name": name, "namespace": "ml", "pod": pod, "replicas": replicas,
            "containers": containers, "init_containers": None, "node_selector": {"karpenter.sh/capacity-type": "spot"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule", "value": None}],
            "priority_class": None, "labels": labels or {}, "annotations": {}, "start_time": None}


GPU_CONTAINER = {"name": "main", "requests": {"cpu": 4.0, "memory": 16 * 2.0**30, "nvidia.com/gpu": 1.0},
                 "limits": {"memory": 16 * 2.0**30, "nvidia.com/gpu": 1.0}}


def test_custom_kinds_are_served_as_themselves() -> None:
    from datetime import UTC, datetime

    from testsupport.demo_cluster import _pod, _workload

    at = datetime(2026, 11, 14, 12, tzinfo=UTC)
    nb = _workload("c9", _row("Notebook", "nb-1", "nb-1-0", 0, [{**GPU_CONTAINER, "name": "nb-1"}],
                              {"notebook-name": "nb-1", "statefulset": "nb-1", "app": "jupyter"}), at)
    ray = _workload("c9", _row("RayJob", "distill", "distill-raycluster-x-gpu-group-worker-abc", 2,
                               [{**GPU_CONTAINER, "name": "ray-worker"}], {"ray.io/node-type": "worker"}), at)
    isvc = _workload("c9", _row("InferenceService", "ranker", "ranker-predictor-abc-x", 3,
                                [{**GPU_CONTAINER, "name": "kserve-container"},
                                 {"name": "istio-proxy", "requests": {"cpu": 0.1}, "limits": {}}]), at)
    assert nb is not None and ray is not None and isvc is not None
    for obj in (nb, ray, isvc):
        validate_object(obj, "1.30")
    assert nb["metadata"]["annotations"] == {NOTEBOOK_STOPPED: "2026-11-14T12:00:00Z"}  # no pods now: stopped
    assert nb["metadata"]["labels"] == {"app": "jupyter"}
    assert nb["spec"]["template"]["spec"]["containers"][0]["name"] == "nb-1"
    cluster = ray["spec"]["rayClusterSpec"]
    assert cluster["workerGroupSpecs"][0]["groupName"] == "gpu-group" and cluster["workerGroupSpecs"][0]["replicas"] == 2
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["name"] == "ray-head" and "nvidia.com/gpu" not in head["resources"]["limits"]
    pred = isvc["spec"]["predictor"]
    assert (pred["minReplicas"], pred["maxReplicas"]) == (3, 6) and "containers" not in pred  # istio-proxy left out
    assert pred["model"]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert pred["nodeSelector"] == {"karpenter.sh/capacity-type": "spot"}
    pod = _pod("c9", {**_row("InferenceService", "ranker", "ranker-predictor-abc-x", 3, []), "uid": None,
                      "node": None, "phase": "Running", "qos_class": None, "priority": None, "snapshot_ts": at},
               isvc, False)
    (owner,) = pod["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["uid"]) == ("serving.kserve.io/v1beta1", "InferenceService",
                                                                  isvc["metadata"]["uid"])
    demo = DemoCluster("c9", at, [nb, ray, isvc])
    servers = start_demo_servers([demo], port=0)
    try:
        kube = KubeClient(servers[0].api.api_client())
        got = kube.get("/apis/serving.kserve.io/v1beta1/namespaces/ml/inferenceservices/ranker")
        assert got["spec"]["predictor"]["minReplicas"] == 3
        assert kube.get("/apis/ray.io/v1/namespaces/ml/rayjobs/distill")["kind"] == "RayJob"
        assert kube.get("/apis/kubeflow.org/v1/namespaces/ml/notebooks/nb-1")["kind"] == "Notebook"
    finally:
        stop_demo_servers(servers)
