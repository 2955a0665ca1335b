"""``gpufinops changes plan|apply|rollback|verify`` end to end: real CLI, app DB on SQLite in the home,
the replaying API server reached through a kubeconfig (from the cluster's k8s source or --kubeconfig)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from kube_replay import KubeReplay, originals_equal
from typer.testing import CliRunner

from changes.model import Actor
from changes.service import ChangeService
from gpufinops.settings import load_settings

DEPLOY = "/apis/apps/v1/namespaces/ml-serving/deployments/llm-api"
DEV = Actor("dev", frozenset({"platform-admin"}))
OPS = Actor("ops", frozenset({"platform-admin"}))


@pytest.fixture()
def kube() -> Iterator[KubeReplay]:
    with KubeReplay() as server:
        yield server


def _app() -> typer.Typer:
    from cli.main import app

    if "changes" not in {g.name for g in app.registered_groups}:  # until the lead wires it into cli/main.py
        from cli.commands import changes

        changes.register(app)
    return app


def _kubeconfig(path: Path, host: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "replay",
        "clusters": [{"name": "replay", "cluster": {"server": host}}],
        "users": [{"name": "controller", "user": {"token": "cli-token"}}],
        "contexts": [{"name": "replay", "context": {"cluster": "replay", "user": "controller"}}],
    }))
    return path


@pytest.fixture()
def home(tmp_path: Path, kube: KubeReplay) -> Path:
    """A home whose config names the replay server as cluster prod's k8s source."""
    kc = _kubeconfig(tmp_path / "kubeconfig", kube.host)
    (tmp_path / "home").mkdir()
    (tmp_path / "gpufinops.yaml").write_text(yaml.safe_dump({
        "home": str(tmp_path / "home"),
        "sources": [{"kind": "k8s", "cluster": "prod", "kubeconfig": str(kc), "context": "replay"}]}))
    return tmp_path


def _service(home: Path) -> ChangeService:
    return ChangeService.from_settings(load_settings(home=home / "home", config=home / "gpufinops.yaml"))


def _approved(home: Path, proposed: dict[str, Any]) -> str:
    svc = _service(home)
    ch = svc.create(actor=DEV, kind="rightsize_cpu_mem", cluster="prod", namespace="ml-serving",
                    target_kind="Deployment", target_name="llm-api", current={}, proposed=proposed, ticket="COST-42")
    svc.approve(ch.id, actor=OPS, reason="ok")
    return ch.id


def run(home: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(_app(), ["--home", str(home / "home"), "--config", str(home / "gpufinops.yaml"),
                                         "changes", *args, "--as", "ops", "--role", "platform-admin"])
    return result.exit_code, " ".join(result.output.split())


PROPOSED: dict[str, Any] = {"container": "llm-api", "cpu": {"target": 6.0}, "memory": {"target": 48 * 2**30}}


def test_plan_prints_ops_and_the_server_dry_run_and_changes_nothing(home: Path, kube: KubeReplay) -> None:
    cid = _approved(home, PROPOSED)
    code, out = run(home, "plan", cid)
    assert code == 0, out
    assert f"1. patch: PATCH {DEPLOY} (strategic patch)" in out
    assert "container llm-api: requests cpu=6, memory=48Gi" in out
    assert "1. accepted by the server-side dry-run" in out
    assert [w.dry_run for w in kube.writes()] == [True]
    code, out = run(home, "apply", cid, "--dry-run")
    assert code == 0 and "server-side dry-run accepted all 1 op(s); nothing was changed" in out
    assert kube.writes(dry_run=False) == []
    assert _service(home).get(cid).status == "approved"


def test_apply_verify_rollback(home: Path, kube: KubeReplay) -> None:
    cid = _approved(home, PROPOSED)
    code, out = run(home, "apply", cid)
    assert code == 0, out
    assert f"change {cid}: verified" in out
    live = kube.get(DEPLOY)
    assert live is not None
    assert live["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] == "48Gi"
    code, out = run(home, "verify", cid)
    assert code == 0 and "verified (1 op(s) checked)" in out
    code, out = run(home, "rollback", cid, "--reason", "p99 latency regressed")
    assert code == 0 and f"change {cid}: rolled_back" in out
    after = kube.get(DEPLOY)
    assert after is not None and originals_equal(after, kube.originals[DEPLOY])
    entry = _service(home).audit(change_id=cid)[-1]
    assert (entry.action, entry.actor, entry.reason) == ("rolled_back", "ops", "p99 latency regressed")


def test_failed_apply_exits_1_with_the_error(home: Path, kube: KubeReplay) -> None:
    cid = _approved(home, PROPOSED)
    kube.fail("PATCH", DEPLOY, 422, dry_run=True, message="admission webhook denied the request: quota exceeded")
    code, out = run(home, "apply", cid)
    assert code == 1
    assert "failed" in out and "quota exceeded" in out and "nothing was changed" in out


def test_kubeconfig_option_overrides_the_source(home: Path, kube: KubeReplay, tmp_path: Path) -> None:
    cid = _approved(home, PROPOSED)
    cfg = yaml.safe_load((home / "gpufinops.yaml").read_text())
    dead = _kubeconfig(tmp_path / "dead-kubeconfig", "http://127.0.0.1:9")
    cfg["sources"][0]["kubeconfig"] = str(dead)
    (home / "gpufinops.yaml").write_text(yaml.safe_dump(cfg))
    good = _kubeconfig(tmp_path / "good-kubeconfig", kube.host)
    code, out = run(home, "plan", cid, "--kubeconfig", str(good))
    assert code == 0, out
    assert kube.requests and all(r.method == "GET" or r.dry_run for r in kube.requests)


def test_unknown_change_and_wrong_status(home: Path, kube: KubeReplay) -> None:
    code, out = run(home, "apply", "chg_000000000000")
    assert code == 2 and "change chg_000000000000 not found" in out
    cid = _approved(home, PROPOSED)
    code, out = run(home, "rollback", cid, "--reason", "nothing applied")
    assert code == 2 and "only an applied, verified or failed change can be rolled back" in out
    assert kube.requests == []


def test_plan_without_a_cluster_prints_the_stored_plan(home: Path, kube: KubeReplay, tmp_path: Path) -> None:
    cid = _approved(home, PROPOSED)
    missing = str(tmp_path / "no-such-kubeconfig")
    code, out = run(home, "plan", cid, "--kubeconfig", missing)
    assert code == 2 and "cannot load Kubernetes credentials" in out  # nothing stored yet: the error
    assert run(home, "apply", cid)[0] == 0
    code, out = run(home, "plan", cid, "--kubeconfig", missing)
    assert code == 0 and "the plan stored when the change was applied" in out
    assert f"1. patch: PATCH {DEPLOY} (strategic patch)" in out
