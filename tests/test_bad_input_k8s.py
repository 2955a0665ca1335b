"""Bad Kubernetes dumps: each is refused with a message naming the file, the item and the field,
and the lake and app DB are unchanged (tests/badinput.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from badinput import AT, DUMP, assert_refused, cli, dump_with, gpu_pod, pods, snapshot


def _set_request(value: str, resource: str = "nvidia.com/gpu") -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        c = gpu_pod(doc)["spec"]["containers"][0]
        req = c["resources"]["requests"]
        req.pop("nvidia.com/gpu", None)
        req[resource] = value
        if "limits" in c["resources"]:
            c["resources"]["limits"] = dict(req)
    return mutate


def _dup_uid(doc: dict[str, Any]) -> None:
    p = pods(doc)
    p[1]["metadata"]["uid"] = p[0]["metadata"]["uid"]


def _dup_name(doc: dict[str, Any]) -> None:
    p = pods(doc)
    clone = json.loads(json.dumps(p[0]))
    clone["metadata"]["uid"] = "another-uid"
    doc["items"].append(clone)


def _big_label(doc: dict[str, Any]) -> None:
    pods(doc)[0]["metadata"].setdefault("labels", {})["blob"] = "x" * 1_000_000


def _no_namespace(doc: dict[str, Any]) -> None:
    pods(doc)[0]["metadata"].pop("namespace")


def _no_name(doc: dict[str, Any]) -> None:
    doc["items"][3]["metadata"].pop("name")


def _item_not_object(doc: dict[str, Any]) -> None:
    doc["items"].insert(2, "a string")


def _bad_cpu(doc: dict[str, Any]) -> None:
    pods(doc)[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"


def _negative_cpu(doc: dict[str, Any]) -> None:
    pods(doc)[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-2"


# (id, mutate, names the message must hold)
DUMP_CASES = [
    ("duplicate-pod-uid", _dup_uid, ["uid", "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e", "llm-api-7d9f8b6c5d-x2k4p",
                                     "nightly-eval-29412345-7wzvq", "bad.json"]),
    ("duplicate-pod-name", _dup_name, ["llm-api-7d9f8b6c5d-x2k4p", "more than once", "bad.json"]),
    ("gpu-half", _set_request("0.5"), ["nvidia.com/gpu", "0.5", "whole number", "bad.json"]),
    ("gpu-1e9", _set_request("1e9"), ["nvidia.com/gpu", "1000000000", "whole number", "bad.json"]),
    ("unknown-mig-profile", _set_request("1", "nvidia.com/mig-9g.99gb"), ["nvidia.com/mig-9g.99gb", "unknown MIG profile", "bad.json"]),
    ("label-1mb", _big_label, ["k8s_pods.labels", "blob", "longer than 63", "bad.json"]),
    ("pod-without-namespace", _no_namespace, ["item 6", "metadata.namespace", "bad.json"]),
    ("item-without-name", _no_name, ["item 3", "metadata.name", "bad.json"]),
    ("item-not-object", _item_not_object, ["item 2", "expected an object", "bad.json"]),
    ("cpu-not-a-quantity", _bad_cpu, ["cpu", "lots", "bad.json"]),
    ("cpu-negative", _negative_cpu, ["k8s_pods.containers.requests", "cpu", "bad.json"]),
]


@pytest.mark.parametrize(("mutate", "names"), [c[1:] for c in DUMP_CASES], ids=[c[0] for c in DUMP_CASES])
def test_bad_dump_is_refused(bad_home: Path, tmp_path: Path, mutate: Callable[[dict[str, Any]], None],
                             names: list[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dump_with(mutate)))
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "k8s", "--cluster", "c1", "--from-dump", bad, "--at", "2026-11-01T05:00:00Z")
    assert_refused(res, before, bad_home, *names)


RAW_CASES = [
    ("not-json", b"this is { not json", ["bad.json", "not JSON"]),
    ("top-level-array", b"[1, 2]", ["bad.json", "expected a JSON object", "list"]),
    ("no-kind", b'{"items": []}', ["bad.json", "no 'kind'"]),
    ("list-without-items", b'{"kind": "List"}', ["bad.json", "no 'items' array"]),
    ("not-utf8", b'{"kind": "List", "items": ["\xff\xfe"]}', ["bad.json", "not JSON"]),
]


@pytest.mark.parametrize(("raw", "names"), [c[1:] for c in RAW_CASES], ids=[c[0] for c in RAW_CASES])
def test_unreadable_dump_is_refused(bad_home: Path, tmp_path: Path, raw: bytes, names: list[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(raw)
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "k8s", "--cluster", "c1", "--from-dump", bad, "--at", "2026-11-01T05:00:00Z")
    assert_refused(res, before, bad_home, *names)


AT_CASES = [
    ("year-9999", "9999-12-31T23:59:59Z", ["--at", "9999-12-31", "out of range"]),
    ("not-a-time", "yesterday", ["--at", "'yesterday'", "ISO 8601"]),
    ("year-1970", "1970-01-01T00:00:00Z", ["k8s_nodes.snapshot_ts", "1970-01-01", "limits"]),
]


@pytest.mark.parametrize(("at", "names"), [c[1:] for c in AT_CASES], ids=[c[0] for c in AT_CASES])
def test_bad_snapshot_time_is_refused(bad_home: Path, at: str, names: list[str]) -> None:
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "k8s", "--cluster", "c1", "--from-dump", DUMP, "--at", at)
    assert_refused(res, before, bad_home, *names)


def test_missing_dump_file_is_named(bad_home: Path, tmp_path: Path) -> None:
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "k8s", "--cluster", "c1", "--from-dump", tmp_path / "nope.json", "--at", AT)
    assert_refused(res, before, bad_home, "nope.json", "does not exist")


def test_duplicate_uid_is_quarantined_with_dq_on_failure(bad_home: Path, tmp_path: Path) -> None:
    """With dq_on_failure: quarantine the batch is kept aside (named in `check`), the lake unchanged."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dump_with(_dup_uid)))
    cfg = tmp_path / "q.yaml"
    cfg.write_text("dq_on_failure: quarantine\n")
    before = snapshot(bad_home)
    res = cli(bad_home, "--config", cfg, "ingest", "k8s", "--cluster", "c1", "--from-dump", bad, "--at", "2026-11-01T05:00:00Z")
    assert_refused(res, before, bad_home, "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e", "llm-api-7d9f8b6c5d-x2k4p")
    reasons = list((bad_home / "lake" / "_quarantine").glob("*/reason.json"))
    assert len(reasons) == 1 and "b1c2d3e4" in reasons[0].read_text()
    res = cli(bad_home, "check", "--only", "rejected_runs")
    assert "quarantined" in res.output and "b1c2d3e4" in " ".join(res.output.split())


def test_pod_on_a_missing_node_is_landed_but_flagged(bad_home: Path, tmp_path: Path) -> None:
    """A pod on a node the snapshot does not hold exists, so it lands, with a warning and a
    `check` finding (it would otherwise be costed at 0 GPU-hours without a word)."""
    def ghost(doc: dict[str, Any]) -> None:
        pods(doc)[0]["spec"]["nodeName"] = "ghost-node-1"
    bad = tmp_path / "ghost.json"
    bad.write_text(json.dumps(dump_with(ghost)))
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "k8s", "--cluster", "c1", "--from-dump", bad, "--at", "2026-11-01T05:00:00Z")
    assert res.exit_code == 0, res.output
    assert snapshot(bad_home).rows("k8s_pods") == before.rows("k8s_pods") + len(pods(dump_with(ghost)))
    res = cli(bad_home, "check", "--only", "pods_on_known_nodes")
    flat = " ".join(res.output.split())
    assert res.exit_code == 0 and "warn" in flat and "c1/ghost-node-1" in flat and "llm-api-7d9f8b6c5d-x2k4p" in flat
