"""deploy/: render the Kustomize overlays with the real kubectl and validate every object."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ingest.k8s.live import CORE_TARGETS
from ingest.k8s.settings import DEFAULT_OWNER_RESOURCES

REPO = Path(__file__).resolve().parents[1]
K8S_VERSIONS = ("1.30", "1.37")  # oldest supported, newest kubernetes-validate ships
READ_VERBS = {"get", "list", "watch"}

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def _render(target: str) -> list[dict[str, Any]]:
    out = subprocess.run(["kubectl", "kustomize", str(REPO / target)], check=True, capture_output=True, text=True, timeout=60)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="module", params=["deploy/overlays/prod", "deploy/base"])
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return _render(request.param)


@pytest.fixture(scope="module")
def prod() -> list[dict[str, Any]]:
    return _render("deploy/overlays/prod")


def _one(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def _pod_specs(objs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for o in objs:
        if o["kind"] == "Deployment":
            out.append((o["metadata"]["name"], o["spec"]["template"]["spec"]))
        elif o["kind"] == "CronJob":
            out.append((o["metadata"]["name"], o["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    return out


def test_every_object_validates_strictly(rendered: list[dict[str, Any]]) -> None:
    kinds = set()
    for obj in rendered:
        for version in K8S_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                path = ".".join(str(p) for p in exc.path)
                pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} invalid for {version} at {path}: {exc.message}")
        kinds.add(obj["kind"])
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
            "PersistentVolumeClaim", "CronJob", "Deployment", "Service"} <= kinds


def test_everything_lives_in_the_namespace_and_is_labelled(rendered: list[dict[str, Any]]) -> None:
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for obj in rendered:
        meta = obj["metadata"]
        if obj["kind"] not in cluster_scoped:
            assert meta.get("namespace") == "gpufinops", f"{obj['kind']}/{meta['name']}"
        labels = meta.get("labels", {})
        assert labels.get("app.kubernetes.io/part-of") == "gpufinops", f"{obj['kind']}/{meta['name']}"
        assert labels.get("app.kubernetes.io/name") == "gpufinops"


def test_ingester_rbac_is_read_only_and_covers_what_it_lists(rendered: list[dict[str, Any]]) -> None:
    role = _one(rendered, "ClusterRole", "gpufinops-ingester")
    granted: set[tuple[str, str, str]] = set()
    for rule in role["rules"]:
        assert set(rule["verbs"]) <= READ_VERBS, rule
        assert "*" not in rule.get("resources", []) and "*" not in rule.get("apiGroups", [])
        granted |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    needed = [("", t.resource) for t in CORE_TARGETS] + [(r.group, r.plural) for r in DEFAULT_OWNER_RESOURCES]
    for group, resource in needed:
        name = resource.split(".")[0]
        assert (group, name, "list") in granted, f'ingester cannot list "{resource}"'
    binding = _one(rendered, "ClusterRoleBinding", "gpufinops-ingester")
    assert binding["roleRef"]["name"] == "gpufinops-ingester"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpufinops-ingester", "namespace": "gpufinops"}]


def test_controller_rbac_is_minimal(rendered: list[dict[str, Any]]) -> None:
    role = _one(rendered, "ClusterRole", "gpufinops-controller")
    allowed = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert "patch" in allowed[("apps", "deployments")] and "patch" in allowed[("apps", "statefulsets")]
    assert allowed[("", "pods/eviction")] == {"create"}
    writes = {"create", "update", "patch", "delete", "deletecollection", "*"}
    for (group, resource), verbs in allowed.items():
        if verbs & writes:
            assert (group, resource) in {("apps", "deployments"), ("apps", "statefulsets"), ("", "pods/eviction")}, resource
        assert "delete" not in verbs and "*" not in verbs


def test_cronjobs_forbid_overlap_and_keep_bounded_history(rendered: list[dict[str, Any]]) -> None:
    crons = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "CronJob"}
    assert set(crons) == {"gpufinops-ingest", "gpufinops-build", "gpufinops-report-weekly"}
    for name, cron in crons.items():
        spec = cron["spec"]
        assert spec["concurrencyPolicy"] == "Forbid", name
        assert 0 < spec["successfulJobsHistoryLimit"] <= 10, name
        assert 0 < spec["failedJobsHistoryLimit"] <= 10, name
    args = {n: c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] for n, c in crons.items()}
    assert args["gpufinops-ingest"] == ["ingest", "all", "--once"]
    assert args["gpufinops-build"] == ["build"]
    assert args["gpufinops-report-weekly"][:3] == ["report", "--period", "weekly"]
    assert crons["gpufinops-ingest"]["spec"]["schedule"] == "*/5 * * * *"


def test_only_the_ingester_gets_an_api_token(rendered: list[dict[str, Any]]) -> None:
    for name, spec in _pod_specs(rendered):
        if name == "gpufinops-ingest":
            assert spec["serviceAccountName"] == "gpufinops-ingester"
            assert spec["automountServiceAccountToken"] is True
        else:
            assert spec["serviceAccountName"] == "gpufinops", name
            assert spec["automountServiceAccountToken"] is False, name


def test_pods_are_hardened_and_share_the_home(rendered: list[dict[str, Any]]) -> None:
    pvc = _one(rendered, "PersistentVolumeClaim", "gpufinops-home")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    specs = _pod_specs(rendered)
    assert len(specs) == 5
    for name, spec in specs:
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        claims = [v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v]
        assert claims == ["gpufinops-home"], name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert "memory" in c["resources"]["limits"], name
            assert {"name": "home", "mountPath": "/var/lib/gpufinops"} in c["volumeMounts"], name


def test_services_select_their_deployments(rendered: list[dict[str, Any]]) -> None:
    for name, port in (("gpufinops-api", 8000), ("gpufinops-dashboard", 8501)):
        svc, dep = _one(rendered, "Service", name), _one(rendered, "Deployment", name)
        pod_labels = dep["spec"]["template"]["metadata"]["labels"]
        assert svc["spec"]["selector"].items() <= pod_labels.items()
        assert dep["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        assert svc["spec"]["ports"][0]["port"] == port
        container_ports = [p["containerPort"] for p in dep["spec"]["template"]["spec"]["containers"][0]["ports"]]
        assert container_ports == [port]


def test_prod_overlay(prod: list[dict[str, Any]]) -> None:
    images = {c["image"] for _, s in _pod_specs(prod) for c in s["containers"]}
    assert images == {"ghcr.io/gpufinops/gpufinops:0.1.0"}
    wants_db = {"gpufinops-api", "gpufinops-dashboard", "gpufinops-build", "gpufinops-report-weekly"}
    for name, spec in _pod_specs(prod):
        env = {e["name"]: e for e in spec["containers"][0].get("env", [])}
        if name in wants_db:
            ref = env["GPUFINOPS_APP_DB_URL"]["valueFrom"]["secretKeyRef"]
            assert ref == {"name": "gpufinops-app-db", "key": "url"}, name
        else:
            assert "GPUFINOPS_APP_DB_URL" not in env, name  # the ingester has no business with the app DB
    assert not any(o["kind"] == "Secret" for o in prod), "secrets are created out of band, not committed"
    assert _one(prod, "Deployment", "gpufinops-api")["spec"]["replicas"] == 2
    assert _one(prod, "ConfigMap", "gpufinops-env")["data"]["GPUFINOPS_CLUSTER"] == "prod-eks-use1"
    assert _one(prod, "PersistentVolumeClaim", "gpufinops-home")["spec"]["storageClassName"] == "efs-sc"
