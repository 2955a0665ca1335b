"""The demo cluster: Kubernetes objects built from a lake's latest snapshot, served over HTTP, and the
``gpufinops demo-cluster`` command (kubeconfig, instructions)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer
import yaml
from test_recommender_loader import build_world
from typer.testing import CliRunner

from controller.demo_cluster import (
    DEMO_STAND_IN,
    DemoCluster,
    build_demo_cluster,
    build_demo_clusters,
    lake_clusters,
    start_demo_servers,
    stop_demo_servers,
)
from controller.kube import KubeClient
from gpufinops.errors import ConfigError, InputError
from gpufinops.settings import Settings


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
    assert c1.counts == {"Deployment": 1, "HorizontalPodAutoscaler": 1, "Job": 2, "Node": 2, "Pod": 4}
    for obj in c1.objects:
        kubernetes_validate.validate(obj, "1.30", strict=True)


def test_workloads_carry_the_pods_resources_and_stand_ins(c1: DemoCluster) -> None:
    etl = _one(c1, "Job", "etl")
    (container,) = etl["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
                                      "limits": {"memory": "32Gi", "nvidia.com/gpu": "1"}}
    assert etl["spec"]["suspend"] is False and DEMO_STAND_IN not in (etl["metadata"].get("annotations") or {})
    train = _one(c1, "Job", "train")  # a PyTorchJob: its pod template served as a batch/v1 Job
    assert train["metadata"]["annotations"] == {DEMO_STAND_IN: "PyTorchJob"}
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
