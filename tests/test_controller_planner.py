"""The pure planner: per change kind, the ops it emits; every patch applied to the recorded object and
the result validated with kubernetes-validate (strict, oldest and newest supported Kubernetes)."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
from kube_replay import FIXTURES, apply_patch, iter_fixture_objects, object_path

from controller.crds import CUSTOM_KINDS
from controller.planner import (
    DO_NOT_DISRUPT,
    Op,
    PlanError,
    PlanRefused,
    format_cpu,
    format_memory,
    format_plan,
    plan,
)
from controller.verify import capture_prior, check_op, restore_patch

K8S_VERSIONS = ("1.30", "1.37")
OBJECTS = {object_path(o): o for o in iter_fixture_objects()}
DEPLOY = "/apis/apps/v1/namespaces/ml-serving/deployments/llm-api"
STS = "/apis/apps/v1/namespaces/ml-serving/statefulsets/embeddings"
JOB = "/apis/batch/v1/namespaces/ml-training/jobs/bert-finetune"
CRON = "/apis/batch/v1/namespaces/ml-training/cronjobs/nightly-eval"
HPA = "/apis/autoscaling/v2/namespaces/ml-serving/horizontalpodautoscalers/llm-api"
N1, N2, N3 = "ip-10-0-40-11.ec2.internal", "ip-10-0-41-12.ec2.internal", "ip-10-0-42-13.ec2.internal"
NODES = [o for o in OBJECTS.values() if o["kind"] == "Node"]
PODS = [o for o in OBJECTS.values() if o["kind"] == "Pod"]
PDBS = [o for o in OBJECTS.values() if o["kind"] == "PodDisruptionBudget"]
NODE_LIVE = {"nodes": NODES, "pods": PODS, "pdbs": PDBS}


def change(kind: str, target_kind: str, name: str, proposed: dict[str, Any], *, namespace: str | None = "ml-serving",
           current: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "chg_000000000001", "kind": kind, "cluster": "prod", "namespace": namespace,
            "target_kind": target_kind, "target_name": name, "current": current or {}, "proposed": proposed}


def live(path: str, **extra: Any) -> dict[str, Any]:
    return {"target": copy.deepcopy(OBJECTS[path]), **extra}


def validate(obj: dict[str, Any]) -> None:
    for version in K8S_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} invalid for {version} at {where}: {exc.message}")


def applied(op: Op) -> dict[str, Any]:
    """The object after the op's patch (the recorded fixture as the server would hold it)."""
    return apply_patch(copy.deepcopy(OBJECTS[op.object_path]), op.body, str(op.patch_type))


def test_fixtures_are_valid_kubernetes_objects() -> None:
    kinds = set()
    for obj in iter_fixture_objects():
        kinds.add(obj["kind"])
        if obj["kind"] not in CUSTOM_KINDS:  # the custom kinds: tests/test_controller_crds.py
            validate(obj)
    assert kinds == {"Deployment", "StatefulSet", "Job", "CronJob", "HorizontalPodAutoscaler", "Node", "Pod",
                     "PodDisruptionBudget", *CUSTOM_KINDS}
    assert len(list(FIXTURES.glob("*.json"))) == 13


# (kind, target_kind, path, proposed, current, expected verb, expected patch type, {pointer: value after})
CASES = [
    ("rightsize_cpu_mem", "Deployment", DEPLOY,
     {"container": "llm-api", "cpu": {"target": 2.5, "lower_bound": 2.0, "upper_bound": 3.1},
      "memory": {"target": 21474836480.0}}, {}, "patch", "strategic",
     {"/spec/template/spec/containers/0/resources/requests/cpu": "2500m",
      "/spec/template/spec/containers/0/resources/requests/memory": "20Gi",
      "/spec/template/spec/containers/0/resources/limits/memory": "64Gi",  # untouched: still above the request
      "/spec/template/spec/containers/1/resources/requests/cpu": "100m"}),  # the sidecar is untouched
    ("rightsize_cpu_mem", "Deployment", DEPLOY,  # the API's shape: cores and GiB; raising memory lifts the limit
     {"container": "metrics-exporter", "cpu": 0.3, "mem_gb": 0.25}, {}, "patch", "strategic",
     {"/spec/template/spec/containers/1/resources/requests/cpu": "300m",
      "/spec/template/spec/containers/1/resources/limits/cpu": "300m",
      "/spec/template/spec/containers/1/resources/requests/memory": "256Mi",
      "/spec/template/spec/containers/1/resources/limits/memory": "256Mi"}),
    ("rightsize_cpu_mem", "StatefulSet", STS, {"cpu": {"target": 1.0}, "memory": {"target": 8 * 2**30}}, {},
     "patch", "strategic",
     {"/spec/template/spec/containers/0/resources/requests/cpu": "1",
      "/spec/template/spec/containers/0/resources/requests/memory": "8Gi"}),
    ("rightsize_cpu_mem", "CronJob", CRON, {"cpu": {"target": 1.75}}, {}, "patch", "strategic",
     {"/spec/jobTemplate/spec/template/spec/containers/0/resources/requests/cpu": "1750m",
      "/spec/jobTemplate/spec/template/spec/containers/0/resources/requests/memory": "32Gi"}),
    ("rightsize_cpu_mem", "Job", JOB, {"memory": {"target": 96 * 2**30}}, {}, "patch", "strategic",
     {"/spec/template/spec/containers/0/resources/requests/memory": "96Gi"}),
    ("rightsize_gpu_count", "StatefulSet", STS, {"gpus_per_pod": 1, "resource": "nvidia.com/gpu"},
     {"gpus_per_pod": 2}, "patch", "strategic",
     {"/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu": "1",
      "/spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu": "1"}),
    ("rightsize_gpu_count", "Job", JOB, {"gpus_per_pod": 2}, {"gpus_per_pod": 4}, "patch", "strategic",
     {"/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu": "2"}),
    ("rightsize_to_mig", "Deployment", DEPLOY,
     {"resource": "nvidia.com/mig-3g.20gb", "count": 1, "mig_profile": "3g.20gb", "gpu_equiv": 0.5},
     {"resource": "nvidia.com/gpu", "count": 1}, "patch", "strategic",
     {"/spec/template/spec/containers/0/resources/limits/nvidia.com~1mig-3g.20gb": "1",
      "/spec/template/spec/containers/0/resources/requests/nvidia.com~1mig-3g.20gb": "1",
      "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu": None,
      "/spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu": None}),
    ("enable_time_slicing", "CronJob", CRON,
     {"resource": "nvidia.com/gpu", "count": 1, "time_slicing_replicas": 4, "gpu_equiv": 0.25}, {},
     "patch", "strategic",
     {"/spec/jobTemplate/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu.shared": "1",
      "/spec/jobTemplate/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu": None}),
    ("reclaim_idle_gpu", "Deployment", DEPLOY, {"action": "reclaim", "release_gpus": 3.0}, {}, "scale", "merge",
     {"/spec/replicas": 0}),
    ("reclaim_idle_gpu", "Job", JOB, {"action": "stop", "release_gpus": 4.0}, {}, "patch", "merge",
     {"/spec/suspend": True}),
    ("reclaim_idle_gpu", "CronJob", CRON, {"action": "reclaim", "release_gpus": 1.0}, {}, "patch", "merge",
     {"/spec/suspend": True}),
    ("scale_to_zero_window", "Deployment", DEPLOY,
     {"action": "scale_to_zero_window", "scale_to_zero_utc_hours": [1, 2, 3, 4, 5]}, {}, "scale", "merge",
     {"/spec/replicas": 0}),
    ("scale_to_zero_window", "HorizontalPodAutoscaler", HPA, {"action": "set_min_replicas", "min_replicas": 1}, {},
     "patch", "merge", {"/spec/minReplicas": 1, "/spec/maxReplicas": 8}),
    ("set_autoscaling", "HorizontalPodAutoscaler", HPA, {"min": 1, "max": 4, "target_rps": 50}, {}, "patch", "merge",
     {"/spec/minReplicas": 1, "/spec/maxReplicas": 4}),
    ("set_autoscaling", "StatefulSet", STS, {"min_replicas": 1, "max_replicas": 1}, {}, "scale", "merge",
     {"/spec/replicas": 1}),
    ("move_to_spot", "Job", JOB, {"capacity_type": "spot", "node_selector": {"karpenter.sh/capacity-type": "spot"}},
     {}, "patch", "strategic", {"/spec/template/spec/nodeSelector/karpenter.sh~1capacity-type": "spot"}),
    ("move_to_spot", "Deployment", DEPLOY, {"capacity_type": "spot"}, {}, "patch", "strategic",
     {"/spec/template/spec/nodeSelector/karpenter.sh~1capacity-type": "spot",
      "/spec/template/spec/nodeSelector/nvidia.com~1gpu.product": "NVIDIA-A100-SXM4-40GB"}),  # existing kept
]


@pytest.mark.parametrize(("kind", "target_kind", "path", "proposed", "current", "verb", "patch_type", "after"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_workload_kinds(kind: str, target_kind: str, path: str, proposed: dict[str, Any], current: dict[str, Any],
                        verb: str, patch_type: str, after: dict[str, Any]) -> None:
    ns = OBJECTS[path]["metadata"]["namespace"]
    ops = plan(change(kind, target_kind, OBJECTS[path]["metadata"]["name"], proposed, namespace=ns,
                      current=current), live(path))
    assert len(ops) == 1
    op = ops[0]
    assert (op.verb, op.api_path, op.patch_type, op.reversible) == (verb, path, patch_type, True)
    new = applied(op)
    validate(new)
    for ptr, value in after.items():
        from controller.verify import _MISSING, resolve
        got = resolve(new, ptr)
        assert (got is _MISSING) if value is None else got == value, ptr
    assert check_op(op, new) == []  # what verification will see once the server holds it
    assert check_op(op, OBJECTS[path]) != []  # and the unchanged object does not pass
    # the restore patch built from the prior spec gives back exactly the recorded object
    prior = capture_prior(ops, OBJECTS)
    back = apply_patch(new, restore_patch(prior["objects"][path], new), "json")
    assert back == OBJECTS[path]
    validate(back)


def test_planner_is_pure_and_deterministic() -> None:
    ch = change("rightsize_to_mig", "Deployment", "llm-api", {"resource": "nvidia.com/mig-1g.5gb"})
    state = live(DEPLOY)
    before = copy.deepcopy(state)
    first, second = plan(ch, state), plan(ch, state)
    assert first == second
    assert state == before
    assert [Op.from_dict(o.to_dict()) for o in first] == first


def test_hpa_found_beside_the_workload_takes_the_autoscaling_change() -> None:
    ops = plan(change("set_autoscaling", "Deployment", "llm-api", {"min": 3, "max": 10}),
               live(DEPLOY, hpa=OBJECTS[HPA]))
    assert [(o.api_path, o.body) for o in ops] == [(HPA, {"spec": {"minReplicas": 3, "maxReplicas": 10}})]
    validate(applied(ops[0]))


def test_quantities_are_canonical_and_rounded_up() -> None:
    assert [format_cpu(x) for x in (0.025, 0.1234, 1.0, 2.0001, 16)] == ["25m", "124m", "1", "2001m", "16"]
    assert [format_memory(x) for x in (250 * 2**20, 2**30, 1.5 * 2**30, 100)] == ["250Mi", "1Gi", "1536Mi", "1Mi"]


def test_drain_cordons_first_then_evicts_with_pdbs_and_skips_daemonsets() -> None:
    ops = plan(change("cordon_drain_node", "Node", N1, {"nodes": [N1]}, namespace=None), NODE_LIVE)
    assert [o.verb for o in ops] == ["cordon", "evict", "evict"]
    cordon = ops[0]
    assert cordon.api_path == f"/api/v1/nodes/{N1}" and cordon.body == {"spec": {"unschedulable": True}}
    validate(applied(cordon))
    assert [(o.namespace, o.name) for o in ops[1:]] == [("ml-serving", "embeddings-1"),
                                                        ("ml-serving", "llm-api-7d9f8b6c5d-q8r2t")]
    assert ops[1].pdbs == ("ml-serving/embeddings",) and "allows 0 disruption" in ops[1].description
    assert ops[2].pdbs == ("ml-serving/llm-api",)
    for ev in ops[1:]:
        assert ev.api_path == f"/api/v1/namespaces/{ev.namespace}/pods/{ev.name}/eviction"
        assert not ev.reversible and ev.patch_type is None
        validate(ev.body)  # a policy/v1 Eviction
    assert not any("dcgm" in o.name for o in ops)  # DaemonSet pods stay


def test_consolidation_drains_the_freed_nodes_of_the_pool() -> None:
    proposed = {"nodes": 2, "freed_nodes": [N1, N3],
                "moves": [{"pod": "ml-serving/llm-api-7d9f8b6c5d-q8r2t", "from": N1, "to": N2}]}
    ops = plan(change("consolidate_nodes", "NodePool", "gpu-a100", proposed, namespace=None,
                      current={"node_pool": "gpu-a100", "nodes": 3}), NODE_LIVE)
    assert [(o.verb, o.name) for o in ops[:2]] == [("cordon", N1), ("cordon", N3)]  # every cordon before any eviction
    assert {o.name for o in ops[2:]} == {"embeddings-1", "llm-api-7d9f8b6c5d-q8r2t", "bert-finetune-8m4xz",
                                         "llm-api-7d9f8b6c5d-w5n9c"}
    assert all(o.verb == "evict" for o in ops[2:])


def test_do_not_disrupt_refuses_the_whole_plan() -> None:
    with pytest.raises(PlanRefused, match=rf'ml-research/jupyter-alice-0 annotated {DO_NOT_DISRUPT}="true"'):
        plan(change("cordon_drain_node", "Node", N2, {"nodes": [N1, N2]}, namespace=None), NODE_LIVE)
    node = copy.deepcopy(next(n for n in NODES if n["metadata"]["name"] == N3))
    node["metadata"]["annotations"][DO_NOT_DISRUPT] = "true"
    with pytest.raises(PlanRefused, match=f"node {N3}"):
        plan(change("cordon_drain_node", "Node", N3, {}, namespace=None), {**NODE_LIVE, "nodes": [node]})


def test_set_mig_config_labels_every_node_of_the_pool() -> None:
    other = copy.deepcopy(NODES[0])
    other["metadata"]["name"] = "cpu-node-1"
    other["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] = "general"
    ops = plan(change("set_mig_config", "NodePool", "gpu-a100", {"mig_config": "all-1g.5gb"}, namespace=None),
               {"nodes": [*NODES, other]})
    assert [o.name for o in ops] == sorted([N1, N2, N3])
    for op in ops:
        assert op.body == {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.5gb"}}}
        assert "all-disabled -> all-1g.5gb" in op.description
        new = applied(op)
        validate(new)
        assert check_op(op, new) == []
        prior = capture_prior([op], OBJECTS)
        assert apply_patch(new, restore_patch(prior["objects"][op.api_path], new), "json") == OBJECTS[op.api_path]


def test_cordon_rollback_removes_the_field_it_added() -> None:
    ops = plan(change("cordon_drain_node", "Node", N3, {}, namespace=None), NODE_LIVE)
    new = applied(ops[0])
    entry = capture_prior(ops, OBJECTS)["objects"][ops[0].api_path]
    assert entry["absent"] == ["/spec/unschedulable"]
    assert restore_patch(entry, new) == [{"op": "remove", "path": "/spec/unschedulable"}]


@pytest.mark.parametrize(("ch", "state", "error", "match"), [
    (change("reclaim_idle_gpu", "Job", "bert-finetune", {"action": "flag_owner"}, namespace="ml-training"),
     live(JOB), PlanRefused, "advice for the owner"),
    (change("rightsize_cpu_mem", "Deployment", "llm-api", {"cpu": {"target": 1}}), live(DEPLOY), PlanError,
     "has 2 containers .*name one in proposed.container"),
    (change("rightsize_cpu_mem", "Deployment", "llm-api", {"container": "nope", "cpu": 1}), live(DEPLOY), PlanError,
     "no container 'nope'"),
    (change("rightsize_cpu_mem", "Deployment", "llm-api", {"container": "llm-api", "cpu": -1}), live(DEPLOY),
     PlanError, "proposed.cpu must be a positive number"),
    (change("rightsize_to_mig", "Deployment", "llm-api", {"resource": "nvidia.com/gpu"}), live(DEPLOY), PlanError,
     "not a MIG resource"),
    (change("rightsize_gpu_count", "Deployment", "llm-api", {"gpus_per_pod": 0}), live(DEPLOY), PlanError,
     "gpus_per_pod must be an integer >= 1"),
    (change("set_autoscaling", "HorizontalPodAutoscaler", "llm-api", {"min": 5, "max": 2}), live(HPA), PlanError,
     "min 5 is above proposed.max 2"),
    (change("scale_to_zero_window", "HorizontalPodAutoscaler", "llm-api", {"action": "scale_to_zero_window",
     "scale_to_zero_utc_hours": [1, 2]}), live(HPA), PlanError, "HPAScaleToZero"),
    (change("rightsize_cpu_mem", "Deployment", "llm-api", {"cpu": 1}), None, PlanError, "needs the live object"),
    (change("cordon_drain_node", "Node", "ghost", {}, namespace=None), NODE_LIVE, PlanError, "ghost not found"),
    (change("set_mig_config", "NodePool", "gpu-a100", {"mig_config": "bad value!"}, namespace=None), NODE_LIVE,
     PlanError, "not a valid label value"),
    (change("set_mig_config", "NodePool", "gpu-h100", {"mig_config": "all-1g.10gb"}, namespace=None), NODE_LIVE,
     PlanError, "gpu-h100 has no nodes"),
    (change("launch_rockets", "Deployment", "llm-api", {}), live(DEPLOY), PlanError, "has no planner"),
])
def test_refusals_name_what_is_wrong(ch: dict[str, Any], state: dict[str, Any] | None, error: type[Exception],
                                     match: str) -> None:
    with pytest.raises(error, match=match):
        plan(ch, state)


def test_format_plan_prints_method_path_and_body() -> None:
    ops = plan(change("cordon_drain_node", "Node", N1, {"nodes": [N1]}, namespace=None), NODE_LIVE)
    text = format_plan(ops)
    assert f"1. cordon: PATCH /api/v1/nodes/{N1} (merge patch)" in text
    assert "2. evict: POST /api/v1/namespaces/ml-serving/pods/embeddings-1/eviction  [not reversible]" in text
    assert '"kind": "Eviction"' in text
    assert format_plan([]) == "(no operations)"
