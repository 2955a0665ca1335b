"""The demo fleet: pools, sharing modes, labels, prices, autoscaling (no lake involved)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ingest.demo.catalog import MIG_LAYOUT, MIG_PROFILES, InstanceCatalog
from ingest.demo.fleet import Fleet, build_fleet, cluster_specs
from ingest.price_card import default_price_card_path, load_price_card

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
START = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
END = START + 86400

pytestmark = pytest.mark.skipif(not (DATA / "openb").is_dir(), reason="shared traces not present")


@functools.cache
def _catalog() -> InstanceCatalog:
    return InstanceCatalog(default_price_card_path())


def _fleet(nodes: int = 12, clusters: int = 2, gpus_per_node: int | None = None) -> Fleet:
    return build_fleet(
        openb_dir=DATA / "openb", catalog=_catalog(), clusters=clusters,
        nodes=nodes, window_start=START, window_end=END, seed=42, gpus_per_node=gpus_per_node,
    )


def test_cluster_names_cycle_providers() -> None:
    specs = cluster_specs(4)
    assert [(s.name, s.provider) for s in specs] == [
        ("prod-aws", "aws"), ("research-gcp", "gcp"), ("edge-azure", "azure"), ("prod-aws-2", "aws")]


@pytest.mark.parametrize("nodes,clusters", [(12, 2), (150, 2), (18, 3)])
def test_tiny_and_default_fleets_have_every_required_pool(nodes: int, clusters: int) -> None:
    fleet = _fleet(nodes, clusters)
    assert len(fleet.nodes) == nodes
    assert len({n.cluster for n in fleet.nodes}) == clusters
    gpu_models = {n.gpu_model for n in fleet.nodes if n.gpu_count}
    assert len(gpu_models) >= 3
    assert {n.capacity_type for n in fleet.nodes} == {"spot", "on_demand"}
    assert any(n.mode == "mig" for n in fleet.nodes)
    assert any(n.mode == "timeslice" for n in fleet.nodes)
    assert any(n.mode == "cpu" for n in fleet.nodes)
    assert any(n.gpu_count and not n.measured for n in fleet.nodes), "one GPU pool runs no dcgm-exporter"


def test_mig_pool_advertises_mixed_profiles_and_no_whole_gpus() -> None:
    mig = [n for n in _fleet().nodes if n.mode == "mig"]
    for n in mig:
        assert n.capacity["nvidia.com/gpu"] == 0
        assert n.labels["nvidia.com/mig.strategy"] == "mixed" and n.mig_config == n.labels["nvidia.com/mig.config"]
        profiles = {k for k, v in n.capacity.items() if k.startswith("nvidia.com/mig-") and v > 0}
        assert len(profiles) >= 2
        assert sum(n.capacity[p.resource] for p in MIG_PROFILES.values() if p.resource in n.capacity) == len(n.mig_instances)
        assert n.gpu_model in ("A100-80GB", "H100-80GB")


def test_mig_layouts_never_exceed_one_gpu_equivalent() -> None:
    # DESIGN §3 counts a MIG slice as max(g/7, mem/8): a layout over 1.0 would read as over-allocation.
    for layout in MIG_LAYOUT:
        assert sum(MIG_PROFILES[p].gpu_equiv for p in layout) <= 1.0 + 1e-9
        assert sum(MIG_PROFILES[p].compute_slices for p in layout) <= 7


def test_time_sliced_pool_has_four_replicas_per_t4() -> None:
    ts = [n for n in _fleet().nodes if n.mode == "timeslice"]
    assert ts
    for n in ts:
        assert n.gpu_replicas == 4 and n.labels["nvidia.com/gpu.replicas"] == "4"
        assert n.capacity["nvidia.com/gpu"] == 4 * n.gpu_count
        assert n.labels["nvidia.com/gpu.product"] == "Tesla-T4"


def test_provider_labels_ids_and_node_size_from_instance_type() -> None:
    catalog = InstanceCatalog(default_price_card_path())
    for n in _fleet(18, 3).nodes:
        row = catalog.by_type[(n.provider, n.instance_type)]
        assert n.capacity["cpu"] == row.vcpu and n.capacity["memory"] == row.memory_gib * 2**30
        assert n.allocatable["cpu"] < n.capacity["cpu"]
        assert n.labels["node.kubernetes.io/instance-type"] == n.instance_type
        assert n.labels["topology.kubernetes.io/zone"] == n.zone
        spot = n.capacity_type == "spot"
        if n.provider == "aws":
            assert n.provider_id.startswith(f"aws:///{n.zone}/i-0")
            assert n.labels["karpenter.sh/capacity-type"] == ("spot" if spot else "on-demand")
        elif n.provider == "gcp":
            assert n.provider_id.startswith("gce://") and n.provider_id.endswith("/" + n.name)
            assert (n.labels.get("cloud.google.com/gke-spot") == "true") == spot
        else:
            assert n.provider_id.startswith("azure:///subscriptions/")
            assert (n.labels.get("kubernetes.azure.com/scalesetpriority") == "spot") == spot
        if n.gpu_count:
            assert int(n.labels["nvidia.com/gpu.count"]) == n.gpu_count == len(n.gpu_uuids)


def test_every_instance_type_has_both_prices() -> None:
    prices = load_price_card(default_price_card_path()).to_pylist()
    priced = {(p["provider"], p["region"], p["instance_type"], p["capacity_type"]) for p in prices}
    for n in _fleet(150, 3).nodes:
        assert (n.provider, n.region, n.instance_type, n.capacity_type) in priced


def test_bench_fleet_is_all_eight_gpu_nodes() -> None:
    fleet = _fleet(1000, 2, gpus_per_node=8)
    assert all(n.gpu_count == 8 for n in fleet.nodes)
    assert sum(n.gpu_count for n in fleet.nodes) == 8000
    assert len({(n.cluster, n.name) for n in fleet.nodes}) == 1000
    assert len({u for n in fleet.nodes for u in n.gpu_uuids}) == 8000
    # whole, measured devices only: the bench's DCGM sample count is GPUs × minutes
    assert {n.mode for n in fleet.nodes} == {"whole"} and all(n.measured for n in fleet.nodes)
    assert {n.capacity_type for n in fleet.nodes} == {"spot", "on_demand"}


def test_nodes_join_leave_and_one_is_cordoned() -> None:
    fleet = _fleet()
    assert sum(1 for n in fleet.nodes if START < n.join_s < END) >= 1
    assert sum(1 for n in fleet.nodes if START < n.leave_s < END) >= 1
    assert sum(1 for n in fleet.nodes if n.cordon) == 1


def test_same_seed_same_fleet() -> None:
    a, b = _fleet(), _fleet()
    assert [(n.name, n.uid, n.instance_type, n.gpu_uuids) for n in a.nodes] == [
        (n.name, n.uid, n.instance_type, n.gpu_uuids) for n in b.nodes]
