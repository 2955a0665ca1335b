"""The executor against the replaying API server, with a real ChangeService on SQLite: the recorded
requests (dry-runs before writes), the stored prior spec, verification, rollback, injected failures,
PDB back-off and the gates that must stop an apply before any request."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_replay import KubeReplay, originals_equal

from changes.model import Actor
from changes.policy import KindPolicy, Policy
from changes.service import ChangeService
from controller.executor import Executor
from controller.kube import KubeClient, KubeSettings
from controller.planner import PlanRefused
from gpufinops.appdb import open_app_db
from gpufinops.errors import Conflict, PolicyRefused

DEPLOY = "/apis/apps/v1/namespaces/ml-serving/deployments/llm-api"
JOB = "/apis/batch/v1/namespaces/ml-training/jobs/bert-finetune"
HPA = "/apis/autoscaling/v2/namespaces/ml-serving/horizontalpodautoscalers/llm-api"
N1, N2, N3 = "ip-10-0-40-11.ec2.internal", "ip-10-0-41-12.ec2.internal", "ip-10-0-42-13.ec2.internal"
NODE = "/api/v1/nodes/{}".format
TEAMS = {"ml-serving": "search", "ml-training": "nlp", "ml-research": "research"}
DEV = Actor("dev", frozenset({"member:search", "member:nlp"}))
LEAD = Actor("lead", frozenset({"team-lead:search", "team-lead:nlp"}))
ADMIN = Actor("root", frozenset({"platform-admin"}))
ADMIN2 = Actor("ops", frozenset({"platform-admin"}))


@pytest.fixture()
def kube() -> Iterator[KubeReplay]:
    with KubeReplay() as server:
        yield server


@pytest.fixture()
def service(tmp_path: Path) -> ChangeService:
    policy = Policy(ticket_pattern=None, approval_ttl_hours=None, evidence_max_age_hours=None,
                    kinds={"default": KindPolicy(approvers=["team-lead"]),
                           "cordon_drain_node": KindPolicy(approvers=["platform-admin"]),
                           "set_mig_config": KindPolicy(approvers=["platform-admin"])})
    return ChangeService(open_app_db(f"sqlite:///{tmp_path / 'app.db'}"), policy,
                         team_of=lambda cluster, ns: TEAMS.get(ns or ""))


class Sleeps(list[float]):
    def __call__(self, s: float) -> None:
        self.append(s)


def executor(service: ChangeService, kube: KubeReplay, sleeps: Sleeps | None = None, **settings: Any) -> Executor:
    s = KubeSettings(**{"backoff_base_s": 0.01, "eviction_max_attempts": 5, **settings})
    return Executor(service, KubeClient(kube.api_client(), settings=s, sleep=sleeps if sleeps is not None else Sleeps()))


def approved(service: ChangeService, kind: str, target_kind: str, name: str, proposed: dict[str, Any], *,
             namespace: str | None = "ml-serving", current: dict[str, Any] | None = None,
             target_resource_version: str | None = None) -> str:
    node = namespace is None
    ch = service.create(actor=ADMIN if node else DEV, kind=kind, cluster="prod", namespace=namespace,
                        target_kind=target_kind, target_name=name, current=current or {}, proposed=proposed,
                        ticket="COST-1", target_resource_version=target_resource_version)
    service.approve(ch.id, actor=ADMIN2 if node else LEAD, reason="looks right")
    return ch.id


MIG = {"resource": "nvidia.com/mig-3g.20gb", "count": 1, "mig_profile": "3g.20gb", "gpu_equiv": 0.5}


def test_apply_dry_runs_first_stores_prior_verifies_and_rolls_back_exactly(
        service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "rightsize_to_mig", "Deployment", "llm-api", MIG, current={"resource": "nvidia.com/gpu"},
                   target_resource_version="48213")
    ex = executor(service, kube)
    done = ex.apply(cid, LEAD)
    assert done.status == "verified", done.error
    writes = kube.writes()
    dry, real = kube.writes(dry_run=True), kube.writes(dry_run=False)
    assert [w.dry_run for w in writes] == [True, False]  # the dry-run first, then the real request
    assert dry[0].path == real[0].path == DEPLOY
    assert dry[0].content_type == real[0].content_type == "application/strategic-merge-patch+json"
    assert dry[0].body == real[0].body
    # the server holds the new resources
    live = kube.get(DEPLOY)
    assert live is not None
    res = live["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["limits"] == {"memory": "64Gi", "nvidia.com/mig-3g.20gb": "1"}
    assert "nvidia.com/gpu" not in res["requests"]
    # the prior spec holds what was there
    entry = done.prior_spec["objects"][DEPLOY]
    assert entry["resource_version"] == "48213"
    assert entry["values"]["/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"] == "1"
    assert done.plan[0]["verb"] == "patch" and done.result["verify"]["ok"] is True
    # rollback on request: dry-run then real JSON patch; the object is the original again
    seen = len(kube.requests)
    back = ex.rollback(cid, LEAD, reason="latency regressed")
    assert back.status == "rolled_back"
    rb = [r for r in kube.requests[seen:] if r.is_write]
    assert [(r.dry_run, r.content_type) for r in rb] == [(True, "application/json-patch+json"),
                                                         (False, "application/json-patch+json")]
    after = kube.get(DEPLOY)
    assert after is not None and originals_equal(after, kube.originals[DEPLOY])
    assert after["metadata"]["resourceVersion"] != "48213"
    actions = [e.action for e in service.audit(change_id=cid)]
    assert actions[-5:] == ["begin_apply", "record_plan", "applied", "verified", "rolled_back"]


def test_every_dry_run_precedes_every_real_write(service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "set_mig_config", "NodePool", "gpu-a100", {"mig_config": "all-1g.5gb"}, namespace=None)
    done = executor(service, kube).apply(cid, ADMIN)
    assert done.status == "verified", done.error
    flags = [w.dry_run for w in kube.writes()]
    assert flags == [True] * 3 + [False] * 3
    assert [w.path for w in kube.writes(dry_run=False)] == [NODE(n) for n in sorted([N1, N2, N3])]
    for n in (N1, N2, N3):
        node = kube.get(NODE(n))
        assert node is not None and node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.5gb"


@pytest.mark.parametrize("status", [500, 422])
def test_failure_mid_apply_rolls_back_the_first_op(service: ChangeService, kube: KubeReplay, status: int) -> None:
    cid = approved(service, "set_mig_config", "NodePool", "gpu-a100", {"mig_config": "all-2g.10gb"}, namespace=None)
    first, second, third = sorted([N1, N2, N3])
    kube.fail("PATCH", NODE(second), status, dry_run=False)
    done = executor(service, kube).apply(cid, ADMIN)
    assert done.status == "failed"
    assert f"op 2/3 (node {second}" in done.error and f"HTTP {status}" in done.error
    assert "the 1 applied op(s) were rolled back" in done.error
    assert done.result["applied_ops"] == [0] and done.result["rolled_back_ops"] == [0]
    for n in (first, second, third):
        node = kube.get(NODE(n))
        assert node is not None and originals_equal(node, kube.originals[NODE(n)]), n
    real = [(w.path, w.content_type) for w in kube.writes(dry_run=False)]
    assert real == [(NODE(first), "application/merge-patch+json"), (NODE(second), "application/merge-patch+json"),
                    (NODE(first), "application/json-patch+json")]  # the restore; the third node never touched
    # an explicit rollback afterwards has nothing left to undo and sends nothing
    seen = len(kube.requests)
    assert executor(service, kube).rollback(cid, ADMIN, reason="clean up").status == "rolled_back"
    assert [r for r in kube.requests[seen:] if r.is_write] == []


def test_server_side_dry_run_rejection_changes_nothing(service: ChangeService, kube: KubeReplay) -> None:
    # a running Job's pod template is immutable: the server-side dry-run says so before any write
    cid = approved(service, "rightsize_gpu_count", "Job", "bert-finetune", {"gpus_per_pod": 2},
                   namespace="ml-training", current={"gpus_per_pod": 4})
    done = executor(service, kube).apply(cid, LEAD)
    assert done.status == "failed"
    assert "server-side dry-run rejected op 1/1" in done.error and "field is immutable" in done.error
    assert kube.writes(dry_run=False) == []
    assert kube.get(JOB) == kube.originals[JOB]


def test_verification_failure_rolls_back(service: ChangeService, kube: KubeReplay) -> None:
    def revert_cpu(path: str, obj: dict[str, Any]) -> None:  # a controller fighting us (e.g. a GitOps sync)
        if path == DEPLOY:
            obj["spec"]["template"]["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "100m"

    kube.after_write.append(revert_cpu)
    cid = approved(service, "rightsize_cpu_mem", "Deployment", "llm-api",
                   {"container": "metrics-exporter", "cpu": {"target": 0.05}})
    done = executor(service, kube).apply(cid, LEAD)
    assert done.status == "rolled_back"
    reason = service.audit(change_id=cid)[-1].reason or ""
    assert reason.startswith("verification failed")
    assert "requests/cpu is '100m', expected '50m'" in reason


def test_drain_backs_off_on_pdb_429_then_evicts(service: ChangeService, kube: KubeReplay) -> None:
    kube.objects["/apis/policy/v1/namespaces/ml-serving/poddisruptionbudgets/embeddings"]["status"][
        "disruptionsAllowed"] = 1
    kube.script_eviction("ml-serving", "embeddings-1", [(429, "2"), (429, "3"), (201, None)])
    cid = approved(service, "cordon_drain_node", "Node", N1, {"nodes": [N1]}, namespace=None)
    sleeps = Sleeps()
    done = executor(service, kube, sleeps).apply(cid, ADMIN)
    assert done.status == "verified", done.error
    assert sleeps == [2.0, 3.0]  # Retry-After honoured
    evictions = [r for r in kube.requests if r.path.endswith("/eviction")]
    assert [(r.path.split("/")[-2], r.dry_run, r.status) for r in evictions] == [
        ("embeddings-1", True, 201), ("llm-api-7d9f8b6c5d-q8r2t", True, 201),
        ("embeddings-1", False, 429), ("embeddings-1", False, 429), ("embeddings-1", False, 201),
        ("llm-api-7d9f8b6c5d-q8r2t", False, 201)]
    assert all(r.body["kind"] == "Eviction" and r.body["apiVersion"] == "policy/v1" for r in evictions)
    assert kube.get("/api/v1/namespaces/ml-serving/pods/embeddings-1") is None
    assert kube.get("/api/v1/namespaces/gpu-operator/pods/nvidia-dcgm-exporter-x7k2p") is not None
    node = kube.get(NODE(N1))
    assert node is not None and node["spec"]["unschedulable"] is True
    # rollback uncordons; the evictions cannot be undone and say so
    back = executor(service, kube).rollback(cid, ADMIN, reason="pool needed again")
    node = kube.get(NODE(N1))
    assert back.status == "rolled_back" and node is not None and "unschedulable" not in node["spec"]
    assert len(back.result["rollback"]["not_reversible"]) == 2


def test_eviction_gives_up_after_the_bound_with_a_clear_error(service: ChangeService, kube: KubeReplay) -> None:
    kube.objects["/apis/policy/v1/namespaces/ml-serving/poddisruptionbudgets/embeddings"]["status"][
        "disruptionsAllowed"] = 1  # the dry-run passes; the real eviction keeps meeting the budget
    kube.script_eviction("ml-serving", "embeddings-1", [(429, "4")])
    cid = approved(service, "cordon_drain_node", "Node", N1, {"nodes": [N1]}, namespace=None)
    sleeps = Sleeps()
    done = executor(service, kube, sleeps, eviction_max_attempts=3).apply(cid, ADMIN)
    assert done.status == "failed"
    assert sleeps == [4.0, 4.0]
    assert "gave up evicting pod ml-serving/embeddings-1 after 3 attempt(s)" in done.error
    assert "PodDisruptionBudget" in done.error and "the 1 applied op(s) were rolled back" in done.error
    node = kube.get(NODE(N1))
    assert node is not None and originals_equal(node, kube.originals[NODE(N1)])  # uncordoned again
    assert kube.get("/api/v1/namespaces/ml-serving/pods/llm-api-7d9f8b6c5d-q8r2t") is not None


def test_pdb_blocking_the_dry_run_stops_before_any_write(service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "cordon_drain_node", "Node", N1, {"nodes": [N1]}, namespace=None)
    sleeps = Sleeps()
    done = executor(service, kube, sleeps, eviction_max_attempts=2).apply(cid, ADMIN)
    assert done.status == "failed" and "server-side dry-run rejected op 2/3" in done.error
    assert sleeps == [5.0]
    assert kube.writes(dry_run=False) == []


def test_do_not_disrupt_pod_is_never_evicted(service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "cordon_drain_node", "Node", N2, {"nodes": [N2]}, namespace=None)
    with pytest.raises(PlanRefused, match="ml-research/jupyter-alice-0 annotated karpenter.sh/do-not-disrupt"):
        executor(service, kube).apply(cid, ADMIN)
    assert kube.writes() == []
    assert service.get(cid).status == "approved"


def test_apply_of_a_change_not_approved_is_a_conflict_without_requests(
        service: ChangeService, kube: KubeReplay) -> None:
    ch = service.create(actor=DEV, kind="rightsize_to_mig", cluster="prod", namespace="ml-serving",
                        target_kind="Deployment", target_name="llm-api", current={}, proposed=MIG, ticket="COST-2")
    with pytest.raises(Conflict, match=f"change {ch.id} is proposed"):
        executor(service, kube).apply(ch.id, LEAD)
    assert kube.requests == []
    with pytest.raises(Conflict, match="only an applied, verified or failed change"):
        executor(service, kube).rollback(ch.id, LEAD, reason="nothing to undo")
    assert kube.requests == []


def test_stale_target_is_refused_by_the_service(service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "rightsize_to_mig", "Deployment", "llm-api", MIG, target_resource_version="48213")
    # someone edits the Deployment after the approval
    KubeClient(kube.api_client()).patch(DEPLOY, {"spec": {"replicas": 4}}, "merge")
    before = len(kube.writes())
    with pytest.raises(PolicyRefused) as err:
        executor(service, kube).apply(cid, LEAD)
    assert err.value.gate == "stale_target"
    assert len(kube.writes()) == before
    assert service.get(cid).status == "approved"


def test_verify_command_marks_an_applied_change(service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "set_autoscaling", "HorizontalPodAutoscaler", "llm-api", {"min": 1, "max": 4})
    ex = executor(service, kube)
    done = ex.apply(cid, LEAD)
    assert done.status == "verified"
    hpa = kube.get(HPA)
    assert hpa is not None and (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)
    again, report = ex.verify(cid, LEAD)
    assert again.status == "verified" and report.ok and report.checked == 1
    # after a manual edit the same verification reports the drift
    KubeClient(kube.api_client()).patch(HPA, {"spec": {"maxReplicas": 9}}, "merge")
    _, report = ex.verify(cid, LEAD)
    assert not report.ok and report.problems == ["HorizontalPodAutoscaler llm-api: /spec/maxReplicas is 9, expected 4"]


def test_preview_reports_the_server_side_dry_run_without_state_change(
        service: ChangeService, kube: KubeReplay) -> None:
    cid = approved(service, "rightsize_gpu_count", "Job", "bert-finetune", {"gpus_per_pod": 2},
                   namespace="ml-training")
    out = executor(service, kube).preview(cid, LEAD)
    assert len(out.ops) == 1 and out.server is not None
    assert "REJECTED by the server-side dry-run" in out.server[0] and "immutable" in out.server[0]
    assert kube.writes(dry_run=False) == [] and service.get(cid).status == "approved"
    assert copy.deepcopy(kube.get(JOB)) == kube.originals[JOB]
