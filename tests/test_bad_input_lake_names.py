"""Partition names: every cluster (and source) name maps to its own folder, reversibly (defect 2),
and a lake written with the old lossy names is upgraded in place when a writer opens it."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from badinput import AT, DUMP, FOCUS, cli
from hypothesis import given, settings
from hypothesis import strategies as st

import ingest.lake as lake_module
from ingest.lake import LakeWriter, partition_files


def encode_name(name: str) -> str:
    return lake_module.encode_name(name)


def decode_name(segment: str) -> str:
    return lake_module.decode_name(segment)

NAMES = [
    "a/b", "a-b", "a_b", "a:b", "a%2Fb", "..", ".", "prod", "_billing",
    "arn:aws:eks:us-east-1:123456789012:cluster/prod-gpu",
    "arn:aws:eks:us-east-1:123456789012:cluster-prod-gpu",
    "集群-東京", "grappe/é", "tab\tname", "emoji-🚀",
]


def test_encoding_is_injective_reversible_and_one_path_segment() -> None:
    encoded = [encode_name(n) for n in NAMES]
    assert len(set(encoded)) == len(NAMES)
    for name, seg in zip(NAMES, encoded, strict=True):
        assert decode_name(seg) == name
        assert "/" not in seg and "__" not in seg and seg not in (".", "..")
    assert encode_name("prod-gpu.1") == "prod-gpu.1"  # names that were already safe keep their folder


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_encoding_round_trips_any_text(name: str) -> None:
    seg = encode_name(name)
    assert decode_name(seg) == name and "/" not in seg and "\x00" not in seg


def test_clusters_differing_only_in_slash_keep_their_rows(tmp_path: Path) -> None:
    home = tmp_path / "home"
    arn = "arn:aws:eks:us-east-1:123456789012:cluster/a-b"
    for cluster in ("a-b", "a/b", arn):
        res = cli(home, "ingest", "k8s", "--cluster", cluster, "--from-dump", DUMP, "--at", AT)
        assert res.exit_code == 0, res.output
    files = [str(p) for p in partition_files(home / "lake", "k8s_pods")]
    got = duckdb.connect().execute("select cluster, count(*) from read_parquet(?) group by 1 order by 1", [files]).fetchall()
    assert [c for c, _ in got] == sorted(["a-b", "a/b", arn]) and len({n for _, n in got}) == 1
    assert {p.parent.parent.name for p in partition_files(home / "lake", "k8s_pods")} == {
        "cluster=a-b", "cluster=a%2Fb", "cluster=" + encode_name(arn)}
    assert len(partition_files(home / "lake", "k8s_pods", cluster="a/b")) == 1


def _to_layout_1(lake: Path) -> None:
    """Rewrite a lake as the old writer left it: lossy folder and file names, no _layout.json."""
    import re

    def old(name: str) -> str:
        return re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-")

    sources = {json.loads(p.read_text())["run_id"]: json.loads(p.read_text())["source"] for p in (lake / "_runs").glob("*.json")}
    for path in list(lake.glob("*/cluster=*/day=*/*.parquet")):
        first = pq.read_table(path, columns=["cluster", "ingest_run_id"]).slice(0, 1).to_pylist()[0]
        source = sources[first["ingest_run_id"]]
        if path.parts[-4] == "billing_focus":  # the old slice key: (provider, period) only
            source = source.rsplit("-", 1)[0]
            rec = lake / "_runs" / f"{first['ingest_run_id']}.json"
            data = json.loads(rec.read_text())
            data["source"] = source
            rec.write_text(json.dumps(data))
        stamp = path.name.split("__", 1)[1]
        dst = lake / path.parts[-4] / f"cluster={old(first['cluster'])}" / path.parent.name / f"{old(source)}__{stamp}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, dst)
    for d in sorted(lake.glob("*/cluster=*/day=*"), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()
    for d in lake.glob("*/cluster=*"):
        if not any(d.iterdir()):
            d.rmdir()
    (lake / "_layout.json").unlink()


def test_an_old_lake_is_upgraded_and_reingest_still_replaces(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for args in (("ingest", "k8s", "--cluster", "prod/gpu", "--from-dump", DUMP, "--at", AT),
                 ("ingest", "billing", "--focus", FOCUS),
                 ("ingest", "prices", "--file", Path(__file__).parent / "fixtures/prices/own_prices.csv", "--format", "csv")):
        res = cli(home, *args, env={"GPUFINOPS_CURRENCY__RATES__EUR": "1.1"})
        assert res.exit_code == 0, res.output
    lake = home / "lake"

    def content() -> dict[str, list]:
        out = {}
        for table in ("k8s_pods", "billing_focus", "prices"):
            files = [str(p) for p in lake.glob(f"{table}/cluster=*/day=*/*.parquet")]
            out[table] = duckdb.connect().execute(
                "select * exclude (ingest_run_id, ingested_at) from read_parquet(?) order by all", [files]).fetchall()
        return out

    before = content()
    _to_layout_1(lake)
    assert (lake / "k8s_pods" / "cluster=prod-gpu").is_dir() and (lake / "billing_focus" / "cluster=billing").is_dir()
    LakeWriter(lake)  # opening the lake upgrades it
    assert json.loads((lake / "_layout.json").read_text())["layout"] == 2
    assert (lake / "k8s_pods" / "cluster=prod%2Fgpu").is_dir() and not (lake / "k8s_pods" / "cluster=prod-gpu").exists()
    assert content() == before
    # Re-ingesting the same inputs replaces their upgraded slices: nothing is counted twice.
    for args in (("ingest", "k8s", "--cluster", "prod/gpu", "--from-dump", DUMP, "--at", AT),
                 ("ingest", "billing", "--focus", FOCUS),
                 ("ingest", "prices", "--file", Path(__file__).parent / "fixtures/prices/own_prices.csv", "--format", "csv")):
        res = cli(home, *args, env={"GPUFINOPS_CURRENCY__RATES__EUR": "1.1"})
        assert res.exit_code == 0, res.output
    assert content() == before


@pytest.mark.parametrize("name", ["", ])
def test_an_empty_name_is_refused(name: str, tmp_path: Path) -> None:
    from gpufinops.errors import SchemaError

    with pytest.raises(SchemaError, match="empty name"):
        LakeWriter(tmp_path).write("k8s_namespaces", [{"snapshot_ts": datetime(2026, 11, 1, tzinfo=UTC), "namespace": "x"}],
                                   source="t", cluster=name, window_start=datetime(2026, 11, 1, tzinfo=UTC),
                                   window_end=datetime(2026, 11, 2, tzinfo=UTC))
