"""``gpufinops ingest k8s --from-dump``: dump files to lake snapshots, through the real CLI and lake."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes_validate
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cli.main import app
from ingest.lake import list_runs, partition_files

FIXTURES = Path(__file__).parent / "fixtures" / "k8s"
DUMP = FIXTURES / "dump-eks-gke-aks.json"
K8S_VERSION = "1.30"  # oldest version we support; kubernetes-validate ships 1.25 ... 1.37 offline
runner = CliRunner()


def _ingest(home: Path, *args: str) -> Any:
    return runner.invoke(app, ["--home", str(home), "ingest", "k8s", *args])


def _rows(home: Path, table: str) -> list[dict[str, Any]]:
    files = partition_files(home / "lake", table)
    return [r for f in files for r in pq.read_table(f).to_pylist()]


# -- the fixtures are real Kubernetes objects ----------------------------------------------------
def _validate_all(items: list[dict[str, Any]]) -> dict[str, int]:
    validated: dict[str, int] = {}
    for item in items:
        try:
            kubernetes_validate.validate(item, K8S_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            continue  # custom resources (RayCluster) have no official schema
        validated[item["kind"]] = validated.get(item["kind"], 0) + 1
    return validated


def test_dump_fixture_validates_against_official_schemas() -> None:
    items = json.loads(DUMP.read_text())["items"]
    validated = _validate_all(items)
    assert validated == {"Node": 6, "Pod": 9, "Namespace": 6, "ReplicaSet": 3, "Job": 2}


def test_api_fixtures_validate_against_official_schemas() -> None:
    kinds = {"pods": ("v1", "Pod"), "nodes": ("v1", "Node"), "namespaces": ("v1", "Namespace"),
             "replicasets": ("apps/v1", "ReplicaSet"), "jobs": ("batch/v1", "Job")}
    total = 0
    for path in sorted((FIXTURES / "api").glob("*.json")):
        doc = json.loads(path.read_text())
        if doc["kind"] == "Status":
            continue
        api_version, kind = kinds[path.stem.split("-")[0]]
        assert doc["kind"] == f"{kind}List"
        items = [{"apiVersion": api_version, "kind": kind, **i} for i in doc["items"]]
        assert sum(_validate_all(items).values()) == len(items)
        total += len(items)
    assert total > 15


def test_strict_validation_would_catch_a_typo() -> None:
    pod = next(i for i in json.loads(DUMP.read_text())["items"] if i["kind"] == "Pod")
    pod["spec"]["nodename"] = "typo"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


# -- CLI --------------------------------------------------------------------------------------------
def test_ingest_dump_lands_one_snapshot(tmp_path: Path) -> None:
    result = _ingest(tmp_path, "--from-dump", str(DUMP), "--cluster", "prod", "--at", "2026-11-28T08:00:00Z")
    assert result.exit_code == 0, result.output
    pods = _rows(tmp_path, "k8s_pods")
    nodes = _rows(tmp_path, "k8s_nodes")
    namespaces = _rows(tmp_path, "k8s_namespaces")
    assert (len(nodes), len(pods), len(namespaces)) == (6, 9, 6)
    ts = datetime(2026, 11, 28, 8, tzinfo=UTC)
    assert {r["snapshot_ts"] for r in pods + nodes + namespaces} == {ts}
    assert {r["cluster"] for r in pods} == {"prod"}
    owners = {r["pod"]: (r["owner_kind"], r["owner_name"]) for r in pods}
    assert owners["llm-api-7d9f8b6c5d-x2k4p"] == ("Deployment", "llm-api")
    assert owners["nightly-eval-29412345-7wzvq"] == ("CronJob", "nightly-eval")
    runs = [r for r in list_runs(tmp_path / "lake") if r.status == "committed"]
    assert len(runs) == 1
    assert runs[0].source == "k8s"
    assert runs[0].rows == {"k8s_nodes": 6, "k8s_pods": 9, "k8s_namespaces": 6}
    assert datetime.fromisoformat(runs[0].window_start) == ts
    assert datetime.fromisoformat(runs[0].window_end) > ts


def test_reingest_is_idempotent(tmp_path: Path) -> None:
    args = ("--from-dump", str(DUMP), "--cluster", "prod", "--at", "2026-11-28T08:00:00Z")
    assert _ingest(tmp_path, *args).exit_code == 0
    assert _ingest(tmp_path, *args).exit_code == 0
    assert len(_rows(tmp_path, "k8s_pods")) == 9
    assert len(partition_files(tmp_path / "lake", "k8s_pods")) == 1


def test_several_dumps_by_glob_use_mtime(tmp_path: Path) -> None:
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    times = [datetime(2026, 11, 28, 8, 0, tzinfo=UTC), datetime(2026, 11, 28, 8, 1, 0, 700000, tzinfo=UTC)]
    for i, t in enumerate(times):
        p = dumps / f"snap-{i}.json"
        shutil.copy(DUMP, p)
        os.utime(p, (t.timestamp(), t.timestamp()))
    result = _ingest(tmp_path, "--from-dump", str(dumps / "snap-*.json"), "--cluster", "prod")
    assert result.exit_code == 0, result.output
    pods = _rows(tmp_path, "k8s_pods")
    assert len(pods) == 18
    assert sorted({r["snapshot_ts"] for r in pods}) == [times[0], times[1].replace(microsecond=0)]


def test_repeated_from_dump_and_at_conflicts(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    shutil.copy(DUMP, a)
    shutil.copy(DUMP, b)
    same = datetime(2026, 11, 28, 9, tzinfo=UTC).timestamp()
    os.utime(a, (same, same))
    os.utime(b, (same, same))
    result = _ingest(tmp_path, "--from-dump", str(a), "--from-dump", str(b), "--cluster", "c")
    assert result.exit_code == 2
    assert "same snapshot time" in result.output and "a.json" in result.output
    result = _ingest(tmp_path, "--from-dump", str(a), "--from-dump", str(b), "--cluster", "c", "--at", "2026-11-28T09:00:00Z")
    assert result.exit_code == 2 and "--at" in result.output
    assert partition_files(tmp_path / "lake", "k8s_pods") == []


def test_typed_pod_list_without_item_kinds(tmp_path: Path) -> None:
    """`kubectl get pods -A -o json` piped through the API form (PodList, items without kind)."""
    page = FIXTURES / "api" / "pods-page1.json"
    result = _ingest(tmp_path, "--from-dump", str(page), "--cluster", "c", "--at", "2026-11-28T08:00:00Z")
    assert result.exit_code == 0, result.output
    assert len(_rows(tmp_path, "k8s_pods")) == 3
    assert _rows(tmp_path, "k8s_nodes") == []


def _broken(tmp_path: Path, mutate: Any) -> Path:
    doc = json.loads(DUMP.read_text())
    mutate(doc)
    p = tmp_path / "broken.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["items"][7]["metadata"].pop("name"), ["item 7", "Pod", "metadata.name"]),
        (lambda d: d["items"].__setitem__(3, "oops"), ["item 3", "expected an object"]),
        (lambda d: d["items"][8]["spec"]["containers"][0]["resources"]["requests"].__setitem__("cpu", "16 cores"),
         ["item 8", "bert-finetune-master-0", "'16 cores'"]),
        (lambda d: d["items"][0]["status"]["capacity"].__setitem__("memory", "1TB"),
         ["item 0", "Node ip-10-0-12-34.ec2.internal", "'1TB'"]),
        (lambda d: d.pop("items"), ["has no 'items'"]),
        (lambda d: d["items"][14]["metadata"].pop("uid"), ["item 14", "Pod default/debug-shell", "metadata.uid"]),
    ],
)
def test_bad_dump_names_file_and_item_and_writes_nothing(tmp_path: Path, mutate: Any, expected: list[str]) -> None:
    path = _broken(tmp_path, mutate)
    result = _ingest(tmp_path, "--from-dump", str(path), "--cluster", "c", "--at", "2026-11-28T08:00:00Z")
    assert result.exit_code == 2
    out = " ".join(result.output.split())  # rich wraps long lines
    for part in [str(path.name), *expected]:
        assert part in out, out
    for table in ("k8s_pods", "k8s_nodes", "k8s_namespaces"):
        assert partition_files(tmp_path / "lake", table) == []


def test_not_json_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("NAME   READY   STATUS\n")
    result = _ingest(tmp_path, "--from-dump", str(bad), "--cluster", "c")
    assert result.exit_code == 2 and "not JSON" in result.output
    result = _ingest(tmp_path, "--from-dump", str(tmp_path / "nope-*.json"), "--cluster", "c")
    assert result.exit_code == 2 and "no file matches" in result.output


def test_failed_reingest_keeps_previous_snapshot(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    shutil.copy(DUMP, good)
    at = ("--at", "2026-11-28T08:00:00Z")
    assert _ingest(tmp_path, "--from-dump", str(good), "--cluster", "c", *at).exit_code == 0
    bad = _broken(tmp_path, lambda d: d["items"][6]["spec"]["containers"][0]["resources"]["limits"].__setitem__("cpu", "x"))
    assert _ingest(tmp_path, "--from-dump", str(bad), "--cluster", "c", *at).exit_code == 2
    assert len(_rows(tmp_path, "k8s_pods")) == 9


def test_dump_on_stdin(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--home", str(tmp_path), "ingest", "k8s", "--from-dump", "-", "--cluster", "c",
                                 "--at", "2026-11-28T08:00:00Z"], input=DUMP.read_text())
    assert result.exit_code == 0, result.output
    assert len(_rows(tmp_path, "k8s_pods")) == 9
    result = runner.invoke(app, ["--home", str(tmp_path), "ingest", "k8s", "--from-dump", "-", "--cluster", "c"],
                           input="{not json")
    assert result.exit_code == 2 and "dump on stdin" in result.output
