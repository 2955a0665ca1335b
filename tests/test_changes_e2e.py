"""The change loop end to end, as the demo runs it: a small lake + warehouse, the real recommender,
the demo cluster built from that lake and served over HTTP, and the CLI (``cli.main.app``) doing
propose -> refused approvals -> approve -> plan -> apply (server-side dry-run, then the real requests)
-> verify -> rollback, with the audit log checked at the end.

World: tests/test_recommender_loader.py ``build_world`` (cluster c1: ``etl`` Job and ``train``
PyTorchJob on n1, ``api`` Deployment on n2), plus a showback table that gives the namespaces teams.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from test_recommender_loader import build_world
from typer.testing import CliRunner

from recommender.engine import run as run_recommender
from recommender.store import RecommendationStore
from testsupport.demo_cluster import (
    DemoCluster,
    build_demo_clusters,
    kubeconfig_doc,
    start_demo_servers,
    stop_demo_servers,
)
from testsupport.fakeapi import FakeKubeAPI, originals_equal

TEAMS = {"data": "data-eng", "ml": "ml-research", "web": "web"}
JOB = "/apis/batch/v1/namespaces/data/jobs/etl"
NODE = "/api/v1/nodes/n1"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("e2e")
    settings = build_world(root / "home")
    con = duckdb.connect(str(settings.warehouse_path))
    con.execute("create table fct_showback_daily (day date, cluster varchar, namespace varchar, team varchar, "
                "chargeback_usd double)")
    con.executemany("insert into fct_showback_daily values ('2026-11-01', 'c1', ?, ?, 1.0)", list(TEAMS.items()))
    con.close()
    run_recommender(settings)  # now = the wall clock: the evidence is fresh for the evidence_age gate
    recs = {(r["kind"], r["workload"]): r["id"] for r in RecommendationStore(settings.effective_app_db_url).list()}
    (cluster,) = build_demo_clusters(settings.lake_dir)
    return {"root": root, "home": settings.home, "recs": recs, "cluster": cluster}


@pytest.fixture()
def served(world: dict[str, Any]) -> Iterator[tuple[FakeKubeAPI, Path]]:
    """A fresh server for the test (the objects copied), and a settings file naming it as c1's source."""
    cluster: DemoCluster = world["cluster"]
    fresh = DemoCluster(cluster.name, cluster.snapshot_at, copy.deepcopy(cluster.objects))
    servers = start_demo_servers([fresh], port=0)
    try:
        kc = world["root"] / f"kubeconfig-{servers[0].api.port}.yaml"
        kc.write_text(yaml.safe_dump(kubeconfig_doc(servers)))
        cfg = world["root"] / f"gpufinops-{servers[0].api.port}.yaml"
        cfg.write_text(yaml.safe_dump({"sources": [{"kind": "k8s", "cluster": "c1", "kubeconfig": str(kc),
                                                    "context": "c1"}]}))
        yield servers[0].api, cfg
    finally:
        stop_demo_servers(servers)


def cli(world: dict[str, Any], cfg: Path, actor: str | None, roles: list[str], *args: str) -> tuple[int, str]:
    from cli.main import app

    who = ["--as", actor, *[x for r in roles for x in ("--role", r)]] if actor else []
    res = CliRunner().invoke(app, ["--home", str(world["home"]), "--config", str(cfg), "changes", *args, *who])
    return res.exit_code, res.output


def _change_id(out: str) -> str:
    m = re.search(r"proposed (chg_[0-9a-f]{12})", out)
    assert m, out
    return m.group(1)


def _audit(world: dict[str, Any], cfg: Path, cid: str) -> list[dict[str, Any]]:
    code, out = cli(world, cfg, "auditor", ["finance"], "audit", cid, "--json")
    assert code == 0, out
    return list(json.loads(out))


def test_reclaim_idle_job_full_loop(world: dict[str, Any], served: tuple[FakeKubeAPI, Path]) -> None:
    kube, cfg = served
    rec = world["recs"][("reclaim_idle_gpu", "etl")]
    lead, other_lead, second = ["team-lead:data-eng"], ["team-lead:web"], ["team-lead:data-eng"]
    code, out = cli(world, cfg, "dana", lead, "propose", "--from-rec", rec, "--ticket", "FIN-101")
    assert code == 0, out
    cid = _change_id(out)
    assert "Job/etl in c1/data" in out

    code, out = cli(world, cfg, "wes", other_lead, "approve", cid, "--reason", "looks fine")
    assert code != 0 and "not found" in out  # another team's lead cannot even see it
    code, out = cli(world, cfg, "dana", lead, "approve", cid, "--reason", "mine")
    assert code != 0 and "may not approve" in out, out  # four-eyes: the requester
    assert not kube.writes()  # nothing reached the cluster yet

    code, out = cli(world, cfg, "lee", second, "approve", cid, "--reason", "idle for 10 h")
    assert code == 0 and "approved" in out, out

    code, out = cli(world, cfg, "lee", second, "plan", cid)
    assert code == 0, out
    assert f"PATCH {JOB} (merge patch)" in out and "suspend" in out and "accepted by the server-side dry-run" in out
    assert kube.writes() and not kube.writes(dry_run=False)  # plan = dry-run only

    before = kube.get(JOB)
    assert before is not None and before["spec"]["suspend"] is False
    kube.requests.clear()
    code, out = cli(world, cfg, "lee", second, "apply", cid)
    assert code == 0 and "verified" in out, out
    writes = [(r.method, r.path, r.dry_run, r.status) for r in kube.writes()]
    assert writes == [("PATCH", JOB, True, 200), ("PATCH", JOB, False, 200)]
    assert kube.writes()[1].body == {"spec": {"suspend": True}}
    after = kube.get(JOB)
    assert after is not None and after["spec"]["suspend"] is True

    code, out = cli(world, cfg, "lee", second, "verify", cid)
    assert code == 0 and "verified" in out and "1 op(s) checked" in out, out

    code, out = cli(world, cfg, "dana", lead, "rollback", cid, "--reason", "the owner resumes it")
    assert code == 0 and "rolled_back" in out, out
    restored = kube.get(JOB)
    assert restored is not None and restored["spec"]["suspend"] is False and originals_equal(before, restored)

    entries = _audit(world, cfg, cid)
    steps = [(e["actor"], e["action"], e["to_status"]) for e in entries]
    assert steps == [
        ("dana", "propose", "proposed"), ("dana", "refused", None), ("lee", "approve", "approved"),
        ("lee", "begin_apply", "applying"), ("lee", "record_plan", "applying"), ("lee", "applied", "applied"),
        ("lee", "verified", "verified"), ("dana", "rolled_back", "rolled_back"),
    ], steps
    assert entries[1]["details"].get("gate") == "four_eyes"
    code, out = cli(world, cfg, None, [], "verify-audit")
    assert code == 0 and "audit log OK" in out, out


def test_consolidate_nodes_cordon_evict_and_uncordon(world: dict[str, Any], served: tuple[FakeKubeAPI, Path]) -> None:
    kube, cfg = served
    rec = world["recs"][("consolidate_nodes", "nodepool/gpu")]
    admin = ["platform-admin"]
    pods_on_n1 = sorted(p["metadata"]["namespace"] + "/" + p["metadata"]["name"] for p in kube.objects.values()
                        if p["kind"] == "Pod" and p["spec"].get("nodeName") == "n1")
    assert pods_on_n1 == ["data/etl-1", "ml/train-0"]
    code, out = cli(world, cfg, "olga", admin, "propose", "--from-rec", rec, "--ticket", "OPS-7")
    assert code == 0, out
    cid = _change_id(out)
    assert "NodePool/gpu" in out

    code, out = cli(world, cfg, "lee", ["team-lead:data-eng"], "approve", cid, "--reason", "ok")
    assert code != 0 and "not found" in out  # node actions are platform-level
    code, out = cli(world, cfg, "olga", admin, "approve", cid, "--reason", "ok")
    assert code != 0 and "may not approve" in out, out  # four-eyes
    code, out = cli(world, cfg, "finn", ["finance"], "approve", cid, "--reason", "saves money")
    assert code != 0 and "platform-admin" in out  # finance sees it but is not an approver of the kind
    code, out = cli(world, cfg, "pat", admin, "approve", cid, "--reason", "n1 is empty after the moves")
    assert code == 0 and "approved" in out, out

    code, out = cli(world, cfg, "pat", admin, "plan", cid)
    assert code == 0, out
    assert "cordon node n1" in out and "evict data/etl-1" in out and "evict ml/train-0" in out
    kube.requests.clear()
    code, out = cli(world, cfg, "pat", admin, "apply", cid)
    assert code == 0 and "verified" in out, out
    writes = [(r.method, r.path, r.dry_run) for r in kube.writes()]
    evict = "/api/v1/namespaces/{}/pods/{}/eviction"
    ops = [("PATCH", NODE), ("POST", evict.format("data", "etl-1")), ("POST", evict.format("ml", "train-0"))]
    assert writes == [(m, p, True) for m, p in ops] + [(m, p, False) for m, p in ops]
    node = kube.get(NODE)
    assert node is not None and node["spec"]["unschedulable"] is True
    assert kube.get("/api/v1/namespaces/data/pods/etl-1") is None and kube.get("/api/v1/namespaces/ml/pods/train-0") is None

    code, out = cli(world, cfg, "pat", admin, "verify", cid)
    assert code == 0 and "verified" in out, out
    code, out = cli(world, cfg, "olga", admin, "rollback", cid, "--reason", "give the node back")
    assert code == 0 and "rolled_back" in out and "not undone: evict data/etl-1" in out, out
    node = kube.get(NODE)
    assert node is not None and "unschedulable" not in node["spec"] and originals_equal(kube.originals[NODE], node)

    steps = [(e["actor"], e["action"]) for e in _audit(world, cfg, cid)]
    assert steps == [("olga", "propose"), ("olga", "refused"), ("pat", "approve"), ("pat", "begin_apply"),
                     ("pat", "record_plan"), ("pat", "applied"), ("pat", "verified"), ("olga", "rolled_back")], steps
    code, out = cli(world, cfg, None, [], "verify-audit")
    assert code == 0 and "audit log OK" in out, out
