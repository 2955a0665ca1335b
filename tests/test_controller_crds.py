"""The custom workload kinds (Kubeflow Notebook / PyTorchJob, RayJob, KServe InferenceService): the
planner's ops per kind of change (each patch applied to the recorded CR, validated, verified and
restored exactly), then apply -> verify -> rollback through the executor and the fake API server."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_replay import KubeReplay, apply_patch, iter_fixture_objects, object_path, originals_equal

from changes.model import TARGET_KINDS, Actor
from changes.policy import KindPolicy, Policy
from changes.service import ChangeService
from controller.crds import CUSTOM_KINDS, NOTEBOOK_STOPPED
from controller.executor import Executor
from controller.kube import KubeClient, KubeError, KubeSettings
from controller.planner import Op, PlanError, plan
from controller.verify import _MISSING, capture_prior, check_op, resolve, restore_patch
from gpufinops.appdb import open_app_db
from testsupport.fakeapi import validate_object

OBJECTS = {object_path(o): o for o in iter_fixture_objects()}
NB = "/apis/kubeflow.org/v1/namespaces/ml-research/notebooks/jupyter-bob"
PJ = "/apis/kubeflow.org/v1/namespaces/ml-training/pytorchjobs/llama-ft"
RJ = "/apis/ray.io/v1/namespaces/ml-training/rayjobs/t5-distill"
ISVC = "/apis/serving.kserve.io/v1beta1/namespaces/ml-serving/inferenceservices/ranker"
ISVC2 = "/apis/serving.kserve.io/v1beta1/namespaces/ml-serving/inferenceservices/llm-custom"
NOW = "2026-11-21T03:04:05Z"
MASTER = "/spec/pytorchReplicaSpecs/Master/template/spec"
WORKER = "/spec/pytorchReplicaSpecs/Worker/template/spec"
HEAD = "/spec/rayClusterSpec/headGroupSpec/template/spec"
RAY_W = "/spec/rayClusterSpec/workerGroupSpecs/0/template/spec"
GPU = "nvidia.com~1gpu"


def change(kind: str, path: str, proposed: dict[str, Any], current: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = OBJECTS[path]
    return {"id": "chg_00000000000c", "kind": kind, "cluster": "prod", "namespace": obj["metadata"]["namespace"],
            "target_kind": obj["kind"], "target_name": obj["metadata"]["name"], "current": current or {},
            "proposed": proposed}


def live(path: str, obj: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"target": copy.deepcopy(obj or OBJECTS[path]), "now": NOW}


def validate(obj: dict[str, Any]) -> None:
    for version in ("1.30", "1.37"):
        validate_object(obj, version)


def test_cr_fixtures_are_valid_and_a_broken_template_is_named() -> None:
    assert CUSTOM_KINDS <= TARGET_KINDS  # the change service accepts them as targets
    kinds = {o["kind"] for o in OBJECTS.values() if o["kind"] in CUSTOM_KINDS}
    assert kinds == set(CUSTOM_KINDS)
    for obj in OBJECTS.values():
        if obj["kind"] in CUSTOM_KINDS:
            validate(obj)
    bad = copy.deepcopy(OBJECTS[RJ])
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"][
        "requests"]["cpu"] = [1]
    with pytest.raises(ValueError, match=r"workerGroupSpecs\.0\.template\.spec\.containers\.0\.resources"):
        validate_object(bad)
    bad = copy.deepcopy(OBJECTS[PJ])
    bad["spec"]["runPolicy"]["suspend"] = "yes"
    with pytest.raises(ValueError, match="runPolicy.suspend"):
        validate_object(bad)
    bad = copy.deepcopy(OBJECTS[ISVC])
    bad["spec"]["predictor"]["minReplicas"] = 9
    with pytest.raises(ValueError, match="minReplicas 9 is above maxReplicas 6"):
        validate_object(bad)


# (change kind, path, proposed, current, patch type, {pointer: value after (None = absent)})
CASES = [
    ("rightsize_cpu_mem", NB, {"container": "jupyter-bob", "cpu": 2.0, "mem_gb": 8}, {}, "json",
     {"/spec/template/spec/containers/0/resources/requests/cpu": "2",
      "/spec/template/spec/containers/0/resources/requests/memory": "8Gi",
      "/spec/template/spec/containers/0/resources/limits/memory": "32Gi"}),
    ("rightsize_to_mig", NB, {"resource": "nvidia.com/mig-3g.40gb", "count": 1}, {"resource": "nvidia.com/gpu"},
     "json", {f"/spec/template/spec/containers/0/resources/limits/{GPU}": None,
              f"/spec/template/spec/containers/0/resources/requests/{GPU}": None,
              "/spec/template/spec/containers/0/resources/limits/nvidia.com~1mig-3g.40gb": "1"}),
    ("rightsize_cpu_mem", PJ, {"container": "pytorch", "cpu": {"target": 12}, "memory": {"target": 300 * 2**30}},
     {}, "json",  # every replica template; a request above the limit lifts the limit
     {f"{MASTER}/containers/0/resources/requests/cpu": "12", f"{WORKER}/containers/0/resources/requests/cpu": "12",
      f"{MASTER}/containers/0/resources/limits/memory": "300Gi",
      f"{WORKER}/containers/0/resources/limits/memory": "300Gi"}),
    ("rightsize_gpu_count", RJ, {"gpus_per_pod": 2}, {"gpus_per_pod": 1}, "json",  # the GPU group only
     {f"{RAY_W}/containers/0/resources/limits/{GPU}": "2", f"{RAY_W}/containers/0/resources/requests/{GPU}": "2",
      f"{HEAD}/containers/0/resources/requests/cpu": "2", f"{HEAD}/containers/0/resources/limits/{GPU}": None}),
    ("rightsize_cpu_mem", ISVC, {"container": "kserve-container", "cpu": 4, "mem_gb": 24}, {}, "json",
     {"/spec/predictor/model/resources/requests/cpu": "4", "/spec/predictor/model/resources/limits/cpu": "8",
      "/spec/predictor/model/resources/requests/memory": "24Gi",
      "/spec/predictor/model/storageUri": "s3://models/ranker/v5"}),
    ("rightsize_cpu_mem", ISVC2, {"container": "token-cache", "cpu": 0.25}, {}, "json",
     {"/spec/predictor/containers/1/resources/requests/cpu": "250m",
      "/spec/predictor/containers/0/resources/requests/cpu": "6"}),
    ("enable_time_slicing", ISVC2, {"count": 1, "time_slicing_replicas": 4}, {}, "json",
     {f"/spec/predictor/containers/0/resources/limits/{GPU}.shared": "1",
      f"/spec/predictor/containers/0/resources/limits/{GPU}": None}),
    ("move_to_spot", PJ, {"capacity_type": "spot"}, {}, "json",
     {f"{MASTER}/nodeSelector/karpenter.sh~1capacity-type": "spot",
      f"{WORKER}/nodeSelector/karpenter.sh~1capacity-type": "spot",
      f"{WORKER}/nodeSelector/nvidia.com~1gpu.product": "NVIDIA-A100-SXM4-80GB"}),
    ("move_to_spot", RJ, {}, {}, "json",
     {f"{HEAD}/nodeSelector/karpenter.sh~1capacity-type": "spot",
      f"{RAY_W}/nodeSelector/karpenter.sh~1capacity-type": "spot"}),
    ("move_to_spot", ISVC, {}, {}, "json", {"/spec/predictor/nodeSelector/karpenter.sh~1capacity-type": "spot"}),
    ("reclaim_idle_gpu", NB, {"action": "stop_notebook", "release_gpus": 1.0}, {}, "merge",
     {f"/metadata/annotations/{NOTEBOOK_STOPPED}": NOW,
      "/metadata/annotations/notebooks.kubeflow.org~1last-activity": "2026-11-20T08:12:44Z"}),
    ("reclaim_idle_gpu", PJ, {"action": "stop"}, {}, "merge",
     {"/spec/runPolicy/suspend": True, "/spec/runPolicy/cleanPodPolicy": "None"}),
    ("reclaim_idle_gpu", RJ, {"action": "reclaim"}, {}, "merge", {"/spec/suspend": True}),
    ("reclaim_idle_gpu", ISVC, {"action": "reclaim"}, {}, "merge", {"/spec/predictor/minReplicas": 0}),
    ("scale_to_zero_window", ISVC, {"action": "scale_to_zero_window", "scale_to_zero_utc_hours": [1, 2, 3, 4]}, {},
     "merge", {"/spec/predictor/minReplicas": 0, "/spec/predictor/maxReplicas": 6}),
    ("scale_to_zero_window", ISVC, {"action": "set_min_replicas", "min_replicas": 1}, {}, "merge",
     {"/spec/predictor/minReplicas": 1}),
    ("set_autoscaling", ISVC, {"min": 1, "max": 3}, {}, "merge",
     {"/spec/predictor/minReplicas": 1, "/spec/predictor/maxReplicas": 3}),
]


@pytest.mark.parametrize(("kind", "path", "proposed", "current", "patch_type", "after"), CASES,
                         ids=[f"{c[0]}-{OBJECTS[c[1]]['kind']}-{i}" for i, c in enumerate(CASES)])
def test_custom_kinds(kind: str, path: str, proposed: dict[str, Any], current: dict[str, Any], patch_type: str,
                      after: dict[str, Any]) -> None:
    ops = plan(change(kind, path, proposed, current), live(path))
    assert len(ops) == 1
    op = ops[0]
    assert (op.verb, op.api_path, op.patch_type, op.reversible) == ("patch", path, patch_type, True)
    new = apply_patch(copy.deepcopy(OBJECTS[path]), op.body, patch_type)
    validate(new)
    for ptr, value in after.items():
        got = resolve(new, ptr)
        assert (got is _MISSING) if value is None else got == value, ptr
    assert check_op(op, new) == [] and check_op(op, OBJECTS[path]) != []
    prior = capture_prior(ops, OBJECTS)
    back = apply_patch(new, restore_patch(prior["objects"][path], new), "json")
    assert back == OBJECTS[path]


def test_json_patches_guard_list_indexes_with_test_ops() -> None:
    (op,) = plan(change("rightsize_gpu_count", RJ, {"gpus_per_pod": 2}, {"gpus_per_pod": 1}), live(RJ))
    tests = [o for o in op.body if o["op"] == "test"]
    assert tests == [{"op": "test", "path": "/spec/rayClusterSpec/workerGroupSpecs/0/groupName", "value": "gpu-group"},
                     {"op": "test", "path": f"{RAY_W}/containers/0/name", "value": "ray-worker"}]
    assert op.body[: len(tests)] == tests  # before any change
    assert "worker group gpu-group: container ray-worker" in op.description
    # the containers were reordered since the plan: the server refuses the patch instead of editing another one
    moved = copy.deepcopy(OBJECTS[RJ])
    spec = moved["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    spec["containers"].insert(0, {"name": "log-shipper", "image": "fluent-bit:3"})
    with pytest.raises(Exception, match="test failed"):
        apply_patch(moved, op.body, "json")


def test_notebook_stop_rollback_keeps_annotations_added_since() -> None:
    bare = copy.deepcopy(OBJECTS[NB])
    del bare["metadata"]["annotations"]
    ops = plan(change("reclaim_idle_gpu", NB, {"action": "stop_notebook"}), live(NB, bare))
    assert ops[0].body == {"metadata": {"annotations": {NOTEBOOK_STOPPED: NOW}}}
    stopped = apply_patch(bare, ops[0].body, "merge")
    entry = capture_prior(ops, {NB: bare})["objects"][NB]
    assert entry["absent"] == ["/metadata/annotations"]
    # nothing else arrived: the whole map the stop created goes
    assert restore_patch(entry, stopped) == [{"op": "remove", "path": "/metadata/annotations"}]
    # the culler stamped last-activity meanwhile: only the stop annotation goes
    stopped["metadata"]["annotations"]["notebooks.kubeflow.org/last-activity"] = NOW
    patch = restore_patch(entry, stopped)
    assert patch == [{"op": "remove", "path": f"/metadata/annotations/{NOTEBOOK_STOPPED}"}]
    assert apply_patch(stopped, patch, "json")["metadata"]["annotations"] == {
        "notebooks.kubeflow.org/last-activity": NOW}


@pytest.mark.parametrize(("ch", "match"), [
    (change("rightsize_cpu_mem", PJ, {"container": "nope", "cpu": 1}), "no container 'nope' in any of its pod templates"),
    (change("set_autoscaling", ISVC, {"min": 8}), "above the predictor's maxReplicas 6"),
    (change("set_autoscaling", NB, {"min": 1}), "cannot scale a Notebook"),
    (change("rightsize_gpu_count", NB, {"gpus_per_pod": 1}, {"resource": "nvidia.com/mig-1g.10gb"}),
     "requesting nvidia.com/mig-1g.10gb|requests nvidia.com/mig-1g.10gb"),
])
def test_refusals_name_what_is_wrong(ch: dict[str, Any], match: str) -> None:
    path = next(p for p, o in OBJECTS.items() if o["metadata"]["name"] == ch["target_name"])
    with pytest.raises(PlanError, match=match):
        plan(ch, live(path))


def test_no_op_on_a_custom_kind_is_a_strategic_merge() -> None:
    for case in CASES:
        kind, path, proposed, current = str(case[0]), str(case[1]), dict(case[2]), dict(case[3])  # type: ignore[call-overload]
        assert all(o.patch_type != "strategic" for o in plan(change(kind, path, proposed, current), live(path)))


# -- apply / verify / rollback on the fake API server ---------------------------------------------
TEAMS = {"ml-serving": "search", "ml-training": "nlp", "ml-research": "research"}
DEV = Actor("dev", frozenset({"member:search", "member:nlp", "member:research"}))
LEAD = Actor("lead", frozenset({"team-lead:search", "team-lead:nlp", "team-lead:research"}))


@pytest.fixture()
def kube() -> Iterator[KubeReplay]:
    with KubeReplay() as server:
        yield server


@pytest.fixture()
def service(tmp_path: Path) -> ChangeService:
    policy = Policy(ticket_pattern=None, approval_ttl_hours=None, evidence_max_age_hours=None,
                    kinds={"default": KindPolicy(approvers=["team-lead"])})
    return ChangeService(open_app_db(f"sqlite:///{tmp_path / 'app.db'}"), policy,
                         team_of=lambda cluster, ns: TEAMS.get(ns or ""))


def executor(service: ChangeService, kube: KubeReplay) -> Executor:
    return Executor(service, KubeClient(kube.api_client(), settings=KubeSettings(backoff_base_s=0.01),
                                        sleep=lambda s: None))


def approved(service: ChangeService, kind: str, path: str, proposed: dict[str, Any],
             current: dict[str, Any] | None = None) -> str:
    obj = OBJECTS[path]
    ch = service.create(actor=DEV, kind=kind, cluster="prod", namespace=obj["metadata"]["namespace"],
                        target_kind=obj["kind"], target_name=obj["metadata"]["name"], current=current or {},
                        proposed=proposed, ticket="COST-9")
    service.approve(ch.id, actor=LEAD, reason="idle")
    return ch.id


def _writes(kube: KubeReplay, since: int = 0) -> list[tuple[str, str, bool, str | None, int]]:
    return [(r.method, r.path, r.dry_run, r.content_type, r.status) for r in kube.requests[since:] if r.is_write]


MERGE, JSONP = "application/merge-patch+json", "application/json-patch+json"


def test_notebook_reclaim_sets_the_stop_annotation_and_rollback_removes_it(
        service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "reclaim_idle_gpu", NB, {"action": "stop_notebook", "release_gpus": 1.0})
    ex = executor(service, kube)
    done = ex.apply(cid, LEAD)
    assert done.status == "verified", done.error
    assert _writes(kube) == [("PATCH", NB, True, MERGE, 200), ("PATCH", NB, False, MERGE, 200)]  # dry-run first
    when = kube.writes()[1].body["metadata"]["annotations"][NOTEBOOK_STOPPED]
    assert kube.writes()[0].body == kube.writes()[1].body and when.endswith("Z") and when[10] == "T"
    stopped = kube.get(NB)
    assert stopped is not None
    assert stopped["metadata"]["annotations"][NOTEBOOK_STOPPED] == when
    assert stopped["metadata"]["annotations"]["notebooks.kubeflow.org/last-activity"] == "2026-11-20T08:12:44Z"
    assert done.prior_spec["objects"][NB]["absent"] == [f"/metadata/annotations/{NOTEBOOK_STOPPED}"]

    assert ex.verify(cid, LEAD)[1].ok
    seen = len(kube.requests)
    back = ex.rollback(cid, LEAD, reason="bob is back")
    assert back.status == "rolled_back"
    assert _writes(kube, seen) == [("PATCH", NB, True, JSONP, 200), ("PATCH", NB, False, JSONP, 200)]
    assert kube.requests[-1].body == [{"op": "remove", "path": f"/metadata/annotations/{NOTEBOOK_STOPPED}"}]
    restored = kube.get(NB)
    assert restored is not None and NOTEBOOK_STOPPED not in restored["metadata"]["annotations"]
    assert originals_equal(restored, kube.originals[NB])


def test_pytorchjob_suspend_then_resume(service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "reclaim_idle_gpu", PJ, {"action": "stop", "release_gpus": 32.0})
    ex = executor(service, kube)
    done = ex.apply(cid, LEAD)
    assert done.status == "verified", done.error
    assert _writes(kube) == [("PATCH", PJ, True, MERGE, 200), ("PATCH", PJ, False, MERGE, 200)]
    assert kube.writes()[1].body == {"spec": {"runPolicy": {"suspend": True}}}
    job = kube.get(PJ)
    assert job is not None and job["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "backoffLimit": 3,
                                                            "suspend": True}
    assert int(job["metadata"]["resourceVersion"]) > 62001 and job["metadata"]["generation"] == 2
    back = ex.rollback(cid, LEAD, reason="resume training")
    assert back.status == "rolled_back"
    job = kube.get(PJ)
    assert job is not None and "suspend" not in job["spec"]["runPolicy"] and originals_equal(job, kube.originals[PJ])


def test_inferenceservice_min_max_then_rollback(service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "set_autoscaling", ISVC, {"min": 1, "max": 3})
    ex = executor(service, kube)
    done = ex.apply(cid, LEAD)
    assert done.status == "verified", done.error
    assert [w[:3] for w in _writes(kube)] == [("PATCH", ISVC, True), ("PATCH", ISVC, False)]
    svc = kube.get(ISVC)
    assert svc is not None and (svc["spec"]["predictor"]["minReplicas"], svc["spec"]["predictor"]["maxReplicas"]) == (1, 3)
    assert done.prior_spec["objects"][ISVC]["values"] == {"/spec/predictor/minReplicas": 2,
                                                         "/spec/predictor/maxReplicas": 6}
    ex.rollback(cid, LEAD, reason="p99 latency")
    svc = kube.get(ISVC)
    assert svc is not None and originals_equal(svc, kube.originals[ISVC])


def test_pytorchjob_rightsize_json_patch_applies_verifies_and_restores(
        service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "rightsize_cpu_mem", PJ, {"container": "pytorch", "cpu": {"target": 12}})
    ex = executor(service, kube)
    done = ex.apply(cid, LEAD)
    assert done.status == "verified", done.error
    assert [w[2:4] for w in _writes(kube)] == [(True, JSONP), (False, JSONP)]
    assert "takes effect when they are recreated" in done.plan[0]["description"]
    job = kube.get(PJ)
    assert job is not None
    for role in ("Master", "Worker"):
        spec = job["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]
        assert spec["containers"][0]["resources"]["requests"]["cpu"] == "12"
    ex.rollback(cid, LEAD, reason="slower steps")
    job = kube.get(PJ)
    assert job is not None and originals_equal(job, kube.originals[PJ])


def test_dry_run_rejection_on_a_cr_writes_nothing(service: ChangeService, kube: KubeReplay) -> None:
    kube.fail("PATCH", RJ, 422, dry_run=True, message="admission webhook denied the request")
    cid = approved(service, "reclaim_idle_gpu", RJ, {"action": "reclaim"})
    done = executor(service, kube).apply(cid, LEAD)
    assert done.status == "failed" and "server-side dry-run rejected op 1/1" in done.error
    assert "admission webhook denied" in done.error
    assert kube.writes(dry_run=False) == [] and kube.get(RJ) == kube.originals[RJ]


def test_custom_objects_go_through_their_real_paths(kube: KubeReplay) -> None:
    client = KubeClient(kube.api_client(), settings=KubeSettings(max_attempts=1), sleep=lambda s: None)
    assert client.get(ISVC2)["spec"]["predictor"]["maxReplicas"] == 3
    out = client.patch(ISVC2, {"spec": {"predictor": {"minReplicas": 0}}}, "merge", dry_run=True)
    assert out["spec"]["predictor"]["minReplicas"] == 0 and kube.get(ISVC2) == kube.originals[ISVC2]
    rec = kube.requests[-1]
    assert (rec.method, rec.path, rec.query, rec.content_type) == ("PATCH", ISVC2, {"dryRun": "All"}, MERGE)
    with pytest.raises(KubeError, match="HTTP 415"):  # a CR has no strategic merge, as on a real server
        client.patch(ISVC2, {"spec": {"predictor": {"minReplicas": 0}}}, "strategic")
    with pytest.raises(KubeError, match="HTTP 422.*maxReplicas"):  # validation of the written CR
        client.patch(ISVC2, {"spec": {"predictor": {"minReplicas": 5}}}, "merge")
    with pytest.raises(KubeError, match="HTTP 404"):
        client.get("/apis/kubeflow.org/v1/namespaces/ml-research/notebooks/ghost")
    op = Op.from_dict(plan(change("move_to_spot", ISVC2, {}), live(ISVC2))[0].to_dict())
    assert op.patch_type == "json" and client.patch(op.api_path, op.body, "json")["metadata"]["resourceVersion"] != "65001"
