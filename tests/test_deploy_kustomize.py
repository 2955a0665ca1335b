"""deploy/: render the Kustomize overlays with the real kubectl and validate every object."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime, timedelta
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
    # what the controller's plans change (controller/planner.py): workload templates and replicas, Job /
    # CronJob suspension, HPA min/max, node cordon and MIG label; evictions are the only create
    patchable = {("apps", "deployments"), ("apps", "statefulsets"), ("batch", "jobs"), ("batch", "cronjobs"),
                 ("autoscaling", "horizontalpodautoscalers"), ("", "nodes"),
                 ("kubeflow.org", "notebooks"), ("kubeflow.org", "pytorchjobs"), ("ray.io", "rayjobs"),
                 ("serving.kserve.io", "inferenceservices")}
    for (group, resource), verbs in allowed.items():
        if (group, resource) == ("", "pods/eviction"):
            continue
        if verbs & writes:
            assert (group, resource) in patchable and verbs & writes == {"patch"}, (group, resource, verbs)
        assert "delete" not in verbs and "*" not in verbs


CRONJOBS = {
    # name: (schedule, component)
    "gpufinops-ingest": ("*/5 * * * *", "ingester"),
    "gpufinops-build": ("15 * * * *", "build"),
    "gpufinops-build-nightly": ("45 2 * * *", "build"),
    "gpufinops-recommend": ("45 5 * * *", "recommend"),
    "gpufinops-report-weekly": ("0 6 * * 1", "report"),
    "gpufinops-report-monthly": ("0 6 1 * *", "report"),
    "gpufinops-report-teams-weekly": ("5 6 * * 1", "report"),
    "gpufinops-budgets": ("10 6 * * *", "budgets"),
}


def _crons(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "CronJob"}


def _container(cron: dict[str, Any]) -> dict[str, Any]:
    return cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]


def test_cronjobs_forbid_overlap_and_keep_bounded_history(rendered: list[dict[str, Any]]) -> None:
    crons = _crons(rendered)
    assert set(crons) == set(CRONJOBS)
    for name, cron in crons.items():
        spec = cron["spec"]
        assert (spec["schedule"], cron["metadata"]["labels"]["app.kubernetes.io/component"]) == CRONJOBS[name], name
        assert spec["timeZone"] == "Etc/UTC", name
        assert spec["concurrencyPolicy"] == "Forbid", name
        assert 0 < spec["successfulJobsHistoryLimit"] <= 10, name
        assert 0 < spec["failedJobsHistoryLimit"] <= 10, name
    args = {n: _container(c)["args"] for n, c in crons.items()}
    assert args["gpufinops-ingest"] == ["ingest", "all", "--once"]
    assert args["gpufinops-build"] == ["build"]
    assert args["gpufinops-build-nightly"] == ["build", "--all-tests", "--no-summary"]
    assert args["gpufinops-recommend"] == ["recommend"]
    for name in ("gpufinops-report-weekly", "gpufinops-report-monthly", "gpufinops-report-teams-weekly",
                 "gpufinops-budgets"):
        assert _container(crons[name])["command"] == ["/bin/sh", "-c"], name
    teams_env = [e["configMapRef"]["name"] for e in _container(crons["gpufinops-report-teams-weekly"])["envFrom"]]
    assert teams_env == ["gpufinops-env", "gpufinops-report-teams"]
    teams = _one(rendered, "ConfigMap", "gpufinops-report-teams")
    assert teams["data"] == {"GPUFINOPS_REPORT_TEAMS": ""}  # overlays name the teams


def _yesterdays() -> set[str]:
    # the job's "yesterday" in UTC; both sides of a midnight the test might straddle
    now = datetime.now(UTC)
    return {(now - timedelta(days=1)).date().isoformat(), now.date().isoformat()}


def _run_script(cron: dict[str, Any], tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """Run a report CronJob's shell script with a stand-in `gpufinops` that logs its arguments one call per
    line and fails for the audience ``team:broken``."""
    container = _container(cron)
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    fake = bindir / "gpufinops"
    fake.write_text('#!/bin/sh\nprintf \'%s\\t\' "$@" >> "$CALLS"; echo >> "$CALLS"\n'
                    'for a in "$@"; do [ "$a" = "team:broken" ] && exit 3; done\nexit 0\n')
    fake.chmod(0o755)
    sh = shutil.which("sh") or "/bin/sh"
    proc = subprocess.run([sh, "-c", *container["args"]], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{bindir}:/usr/bin:/bin", "CALLS": str(log), **env})
    calls = [line.rstrip("\t").split("\t") for line in log.read_text().splitlines()] if log.exists() else []
    return proc, calls


@pytest.mark.parametrize("name, period", [("gpufinops-report-weekly", "weekly"), ("gpufinops-report-monthly", "monthly")])
def test_finance_reports_cover_the_period_that_ended_yesterday(prod, tmp_path, name, period) -> None:
    proc, calls = _run_script(_crons(prod)[name], tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    assert len(calls) == 1
    call = calls[0]
    assert call[:6] == ["report", "--period", period, "--audience", "finance", "--send"]
    assert call[6] == "--as-of" and call[7] in _yesterdays() and len(call) == 8


def test_budget_breaches_are_checked_for_yesterday_and_sent(prod, tmp_path) -> None:
    proc, calls = _run_script(_crons(prod)["gpufinops-budgets"], tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    assert len(calls) == 1
    call = calls[0]
    assert call[:3] == ["budgets", "check", "--send"]
    assert call[3] == "--as-of" and call[4] in _yesterdays() and len(call) == 5


def test_team_reports_loop_over_the_listed_teams(prod, tmp_path) -> None:
    cron = _crons(prod)["gpufinops-report-teams-weekly"]
    proc, calls = _run_script(cron, tmp_path, {"GPUFINOPS_REPORT_TEAMS": "alpha broken  beta"})
    assert [c[:5] for c in calls] == [["report", "--period", "weekly", "--audience", f"team:{t}"]
                                      for t in ("alpha", "broken", "beta")]  # a failure does not stop the rest
    assert all(c[5] == "--as-of" and c[6] in _yesterdays() and c[7:] == ["--send"] for c in calls)
    assert proc.returncode == 1 and "failed for: broken" in proc.stderr


def test_team_reports_with_no_teams_listed_send_nothing(prod, tmp_path) -> None:
    proc, calls = _run_script(_crons(prod)["gpufinops-report-teams-weekly"], tmp_path, {"GPUFINOPS_REPORT_TEAMS": ""})
    assert proc.returncode == 0 and calls == [] and "no team reports" in proc.stdout


def test_only_the_ingester_and_the_api_get_an_api_token(rendered: list[dict[str, Any]]) -> None:
    names = set()
    for name, spec in _pod_specs(rendered):
        names.add(name)
        if name == "gpufinops-ingest":
            assert spec["serviceAccountName"] == "gpufinops-ingester"
            assert spec["automountServiceAccountToken"] is True
        elif name == "gpufinops-api":  # applies approved changes: the controller's account
            assert spec["serviceAccountName"] == "gpufinops-controller"
            assert spec["automountServiceAccountToken"] is True
        else:
            assert spec["serviceAccountName"] == "gpufinops", name
            assert spec["automountServiceAccountToken"] is False, name
    assert {"gpufinops-ingest", "gpufinops-api", "gpufinops-dashboard"} <= names


def test_pods_are_hardened_and_share_the_home(rendered: list[dict[str, Any]]) -> None:
    pvc = _one(rendered, "PersistentVolumeClaim", "gpufinops-home")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    specs = _pod_specs(rendered)
    assert len(specs) == 2 + len(CRONJOBS)  # the API and dashboard Deployments
    for name, spec in specs:
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        # the image's user (Dockerfile), so files on the home volume keep one owner
        assert (spec["securityContext"]["runAsUser"], spec["securityContext"]["runAsGroup"]) == (10001, 10001), name
        claims = [v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v]
        assert claims == ["gpufinops-home"], name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert "memory" in c["resources"]["limits"], name
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), name
            assert {"name": "home", "mountPath": "/var/lib/gpufinops"} in c["volumeMounts"], name


def test_servers_have_probes_on_their_health_endpoints(rendered: list[dict[str, Any]]) -> None:
    for name, health in (("gpufinops-api", "/healthz"), ("gpufinops-dashboard", "/_stcore/health")):
        (c,) = _one(rendered, "Deployment", name)["spec"]["template"]["spec"]["containers"]
        assert c["readinessProbe"]["httpGet"] == {"path": health, "port": "http"}, name
        # liveness only asks whether the process answers: a busy warehouse must not restart the pod
        assert c["livenessProbe"]["tcpSocket"] == {"port": "http"}, name


def test_the_image_tools_write_nowhere_but_the_volumes(rendered: list[dict[str, Any]]) -> None:
    env = _one(rendered, "ConfigMap", "gpufinops-env")["data"]
    assert env["GPUFINOPS_HOME"] == "/var/lib/gpufinops"
    # the image sets HOME and the caches under the home; nothing here points them at the read-only root
    assert not {"HOME", "DBT_TARGET_PATH", "DBT_LOG_PATH", "MPLCONFIGDIR", "XDG_CACHE_HOME"} & set(env)
    for name, spec in _pod_specs(rendered):
        for c in spec["containers"]:
            assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"], name
        assert {"name": "tmp", "emptyDir": {}} in spec["volumes"], name


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
    # every piece that opens the app DB: the recommender writes recommendations, reports read them
    wants_db = {"gpufinops-api", "gpufinops-dashboard", "gpufinops-build", "gpufinops-build-nightly", "gpufinops-recommend",
                "gpufinops-report-weekly", "gpufinops-report-monthly", "gpufinops-report-teams-weekly"}
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
