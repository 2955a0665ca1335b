"""The consolidation packer: hand-worked scenarios and hypothesis properties."""

from __future__ import annotations

import math
from itertools import product

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recommender.model import NodeShape, PodPlacement, Taint, Toleration
from recommender.packing import PackingSettings, check_plan, lower_bound, pack_pool

GIB = 1024.0**3


def node(name: str, cpu: float = 10, mem: float = 64 * GIB, gpus: int = 0, model: str | None = None,
         price: float = 1.0, **kw: object) -> NodeShape:
    alloc = {"cpu": cpu, "memory": mem}
    if gpus:
        alloc["nvidia.com/gpu"] = gpus
    return NodeShape(name, "c1", "pool", alloc, gpu_model=model, gpu_count=gpus, hourly_price_usd=price, **kw)  # type: ignore[arg-type]


def pod(name: str, on: str, cpu: float, mem: float = GIB, gpus: int = 0, tier: str = "batch", frac: float = 0.0,
        owner: str | None = "Job", **kw: object) -> PodPlacement:
    req = {"cpu": cpu, "memory": mem}
    if gpus:
        req["nvidia.com/gpu"] = gpus
    return PodPlacement("c1", "ns", name, on, req, gpu_equiv=gpus or frac, gpu_fraction=frac, tier=tier,
                        owner_kind=owner, owner_name=name, **kw)  # type: ignore[arg-type]


FFD_ONLY = PackingSettings(use_cp_sat=False, use_repack=False, search_time_s=0)
SEARCH_ONLY = PackingSettings(use_cp_sat=False, use_repack=False)
CP = PackingSettings(time_limit_s=5, use_repack=False)


def test_cp_sat_improves_where_drain_ffd_is_stuck() -> None:
    # Items 5,5,4,3,3 in bins of 10: two bins suffice (5+5, 4+3+3) but no single node drains greedily.
    nodes = [node("n0"), node("n1"), node("n2")]
    pods = [pod("a5", "n0", 5), pod("b4", "n0", 4), pod("c5", "n1", 5), pod("d3", "n1", 3), pod("e3", "n2", 3)]
    ffd = pack_pool(nodes, pods, FFD_ONLY)
    assert ffd.freed_nodes == [] and ffd.lower_bound == 2
    plan = pack_pool(nodes, pods, CP)
    assert plan.nodes_after == 2 and plan.gap == 0 and len(plan.freed_nodes) == 1
    assert len(plan.moves) == 3  # the fewest evictions that free a node
    assert plan.hourly_savings_usd == pytest.approx(1.0) and plan.monthly_savings_usd == pytest.approx(730.0)
    assert check_plan(nodes, pods, plan) == []


def test_repack_frees_what_drain_ffd_cannot_and_keeps_pods_home() -> None:
    # the same pool: a best-fit-decreasing repack of every pod (5,5 | 4,3,3) needs two nodes with
    # no CP-SAT; relabelling puts each bin on a node holding some of its own pods: two stay home
    nodes = [node("n0"), node("n1"), node("n2")]
    pods = [pod("a5", "n0", 5), pod("b4", "n0", 4), pod("c5", "n1", 5), pod("d3", "n1", 3), pod("e3", "n2", 3)]
    plan = pack_pool(nodes, pods, PackingSettings(use_cp_sat=False))
    assert plan.nodes_after == 2 == plan.lower_bound and plan.solver == "repack"
    assert not check_plan(nodes, pods, plan) and len(plan.moves) <= 3
    assert plan.stats["ffd_nodes_after"] == 3 and plan.stats["repack_nodes_after"] == 2


def _blocked_pool() -> tuple[list[NodeShape], list[PodPlacement]]:
    """n0's whole-GPU pod finds no idle device: n1 and n2 each have one device whole-used by an
    unmovable pod and one shared (0.3 on n1, 0.6 on n2); n1 and n2 cannot drain."""
    nodes = [node(f"n{i}", gpus=2, model="T4") for i in range(3)]
    pods = [pod("j", "n0", 1, gpus=1),
            pod("w1", "n1", 1, gpus=1, do_not_disrupt=True), pod("k", "n1", 1, frac=0.3),
            pod("w2", "n2", 1, gpus=1, do_not_disrupt=True), pod("s", "n2", 1, frac=0.6, do_not_disrupt=True)]
    return nodes, pods


def test_the_search_frees_a_node_by_ejecting_a_share_that_blocks_a_device() -> None:
    nodes, pods = _blocked_pool()
    assert pack_pool(nodes, pods, FFD_ONLY).freed_nodes == []
    plan = pack_pool(nodes, pods, SEARCH_ONLY)
    # k (0.3) joins s on n2's shared device, so n1's device is idle for j: n0 is freed
    assert plan.freed_nodes == ["n0"] and plan.stats["search_closed"] == 1 and plan.solver == "ffd+search"
    assert {(m.pod, m.to_node) for m in plan.moves} == {("j", "n1"), ("k", "n2")}
    assert check_plan(nodes, pods, plan) == []


def test_the_search_keeps_within_the_eviction_cap() -> None:
    nodes, pods = _blocked_pool()
    # freeing n0 costs two evictions: a cap of 1.5 per node freed leaves the pool as it is
    plan = pack_pool(nodes, pods, SEARCH_ONLY, max_evictions_per_node_freed=1.5)
    assert plan.freed_nodes == [] and plan.moves == []
    assert pack_pool(nodes, pods, SEARCH_ONLY, max_evictions_per_node_freed=2).freed_nodes == ["n0"]


def test_pods_swap_back_home() -> None:
    from recommender.packing import _State, _swap_home

    # a and b filled each other's node: neither fits home alone, the swap puts both back
    nodes = [node("n0", cpu=4), node("n1", cpu=4)]
    pods = [pod("a", "n0", 3), pod("b", "n1", 3)]
    s = _State(nodes, pods, PackingSettings(), {})
    for j in (0, 1):
        s._remove(j)
    s._place(0, 1)
    s._place(1, 0)
    assert _swap_home(s) == 1 and list(s.assign) == list(s.orig)
    assert s.used[:, s.dims.index("cpu")].tolist() == [3, 3]


def test_neighbourhood_search_on_a_pool_larger_than_one_neighbourhood() -> None:
    # The stuck 5,5,4,3,3 pattern plus four full nodes, with neighbourhoods of 4 nodes: the search
    # still finds the node to free (the full nodes take nothing, so the bound is 2 + 4 = 6).
    nodes = [node(f"n{i}") for i in range(3)] + [node(f"f{i}") for i in range(4)]
    pods = [pod("a5", "n0", 5), pod("b4", "n0", 4), pod("c5", "n1", 5), pod("d3", "n1", 3), pod("e3", "n2", 3)]
    pods += [pod(f"full{i}", f"f{i}", 10) for i in range(4)]
    plan = pack_pool(nodes, pods, PackingSettings(time_limit_s=6, neighbourhood_nodes=4, use_repack=False))
    assert pack_pool(nodes, pods, FFD_ONLY).nodes_after == 7
    assert plan.nodes_after == 6 and plan.stats["cp_sat_improvements"] >= 1
    assert check_plan(nodes, pods, plan) == []


def test_empty_nodes_are_freed_without_moves_and_daemonsets_stay() -> None:
    nodes = [node("n0"), node("n1", price=3.0)]
    pods = [pod("a", "n0", 2), pod("ds0", "n0", 0.1, owner="DaemonSet", tier="system"),
            pod("ds1", "n1", 0.1, owner="DaemonSet", tier="system")]
    plan = pack_pool(nodes, pods, CP)
    assert plan.freed_nodes == ["n1"] and plan.moves == [] and plan.hourly_savings_usd == pytest.approx(3.0)


def test_serving_moves_only_when_allowed() -> None:
    nodes = [node("n0"), node("n1")]
    pods = [pod("web", "n1", 1, tier="serving", owner="Deployment"), pod("a", "n0", 2)]
    plan = pack_pool(nodes, pods, CP)
    assert "n1" not in plan.freed_nodes and all(m.pod != "web" for m in plan.moves)
    allowed = pack_pool(nodes, pods, PackingSettings(allow_serving_moves=True, time_limit_s=2))
    assert allowed.nodes_after == 1 and len(allowed.moves) == 1


@pytest.mark.parametrize("blocker", ["do_not_disrupt", "bare_pod", "pdb_exhausted"])
def test_unmovable_pods_pin_their_node(blocker: str) -> None:
    nodes = [node("n0"), node("n1")]
    kw: dict[str, object] = {}
    if blocker == "do_not_disrupt":
        kw["do_not_disrupt"] = True
    elif blocker == "bare_pod":
        kw["owner"] = None
    else:
        kw["pdb"] = "pdb-a"
    pods = [pod("a", "n0", 2), pod("b", "n1", 1, **kw)]
    plan = pack_pool(nodes, pods, CP, pdb_allowed={"pdb-a": 0})
    assert plan.freed_nodes == ["n0"] and [m.pod for m in plan.moves] == ["a"]


def test_pdb_budget_limits_evictions() -> None:
    nodes = [node("n0"), node("n1"), node("n2")]
    pods = [pod("a", "n1", 1, pdb="p"), pod("b", "n1", 1, pdb="p"), pod("c", "n2", 1, pdb="p"), pod("x", "n0", 1)]
    plan = pack_pool(nodes, pods, CP, pdb_allowed={"p": 1})
    moved_in_pdb = [m for m in plan.moves if m.pod in ("a", "b", "c")]
    assert len(moved_in_pdb) <= 1
    # n1 holds two pods of the PDB (one eviction allowed), so it stays; n2 (one PDB pod) and n0 drain.
    assert sorted(plan.freed_nodes) == ["n0", "n2"] and plan.assignment["ns/a"] == "n1"
    assert check_plan(nodes, pods, plan, pdb_allowed={"p": 1}) == []


def test_taints_selectors_and_cordons_are_respected() -> None:
    tainted = node("t", taints=(Taint("dedicated", "ml", "NoSchedule"),))
    labelled = node("l", labels={"disk": "ssd"})
    cordoned = node("x", unschedulable=True)
    nodes = [node("src"), tainted, labelled, cordoned]
    pods = [pod("needs-ssd", "src", 1, node_selector={"disk": "ssd"}), pod("plain", "src", 1),
            pod("tol", "x", 1, tolerations=(Toleration("dedicated", "Equal", "ml", "NoSchedule"),))]
    plan = pack_pool(nodes, pods, CP)
    dest = {m.pod: m.to_node for m in plan.moves}
    assert "x" not in plan.assignment.values() or all(m.to_node != "x" for m in plan.moves)
    assert dest.get("needs-ssd", "l") == "l"  # only the labelled node satisfies the selector
    assert dest.get("plain", "l") != "t"  # the taint is not tolerated
    assert check_plan(nodes, pods, plan) == []


def test_gpu_model_is_respected() -> None:
    nodes = [node("a100", gpus=4, model="A100"), node("t4", gpus=4, model="T4"), node("a100b", gpus=4, model="A100")]
    pods = [pod("p1", "a100", 1, gpus=1), pod("p2", "t4", 1, gpus=1), pod("p3", "a100b", 1, gpus=2)]
    plan = pack_pool(nodes, pods, CP)
    assert plan.freed_nodes in (["a100"], ["a100b"])  # the two A100 nodes merge; the T4 pod cannot leave
    assert all(m.to_node != "t4" for m in plan.moves) and all(m.pod != "p2" for m in plan.moves)


def test_fractional_gpus_fit_device_by_device() -> None:
    # Three 0.6-GPU pods: 1.8 ≤ 2 GPUs in total, but no two share one device, so nothing merges.
    nodes = [node("n0", gpus=2, model="V100"), node("n1", gpus=2, model="V100")]
    pods = [pod("f1", "n0", 1, frac=0.6), pod("f2", "n0", 1, frac=0.6), pod("f3", "n1", 1, frac=0.6)]
    assert pack_pool(nodes, pods, CP).freed_nodes == []
    # With 0.4-GPU pods two share a device: everything fits on one node.
    pods4 = [pod("f1", "n0", 1, frac=0.4), pod("f2", "n0", 1, frac=0.4), pod("f3", "n1", 1, frac=0.4)]
    assert len(pack_pool(nodes, pods4, CP).freed_nodes) == 1


def test_whole_gpus_need_idle_devices() -> None:
    # n1 holds a 2-GPU pod; n0 has 1 whole device free plus a device with 0.5 used: the pod cannot move.
    nodes = [node("n0", gpus=2, model="A"), node("n1", gpus=2, model="A")]
    pods = [pod("f", "n0", 1, frac=0.5), pod("w2", "n1", 1, gpus=2)]
    plan = pack_pool(nodes, pods, CP)
    assert all(m.pod != "w2" or m.to_node != "n0" for m in plan.moves)
    assert plan.nodes_after == 2 or [m.pod for m in plan.moves] == ["f"]


def test_lower_bound_formula() -> None:
    nodes = [node("n0", cpu=16, gpus=8), node("n1", cpu=16, gpus=8)]
    pods = [pod("a", "n0", 10, gpus=3), pod("b", "n1", 10, gpus=2),
            pod("ds", "n0", 8, owner="DaemonSet", tier="system")]
    # ⌈5/8⌉ = 1 GPU-wise, ⌈20/16⌉ = 2 CPU-wise; the DaemonSet does not count.
    assert lower_bound(nodes, pods) == 2


# -- properties ----------------------------------------------------------------------------------

@st.composite
def pools(draw: st.DrawFn) -> tuple[list[NodeShape], list[PodPlacement], dict[str, int]]:
    n_nodes = draw(st.integers(2, 6))
    models = draw(st.lists(st.sampled_from(["A100", "T4"]), min_size=n_nodes, max_size=n_nodes))
    nodes = []
    for i in range(n_nodes):
        taints = (Taint("dedicated", "x", "NoSchedule"),) if draw(st.integers(0, 5)) == 0 else ()
        nodes.append(node(f"n{i}", cpu=draw(st.sampled_from([4, 8, 16])), mem=draw(st.sampled_from([8, 32])) * GIB,
                          gpus=draw(st.sampled_from([0, 2, 4])), model=models[i], price=draw(st.sampled_from([1.0, 2.5])),
                          labels={"zone": draw(st.sampled_from(["a", "b"]))}, taints=taints,
                          unschedulable=draw(st.integers(0, 7)) == 0))
    used = {n.name: {"cpu": 0.0, "memory": 0.0, "gpu": 0, "dev": [1.0] * n.gpu_count} for n in nodes}
    pods: list[PodPlacement] = []
    for j in range(draw(st.integers(0, 14))):
        n = nodes[draw(st.integers(0, n_nodes - 1))]
        u = used[n.name]
        cpu, mem = draw(st.sampled_from([0.5, 1, 2, 3])), draw(st.sampled_from([1, 2, 4])) * GIB
        kind = draw(st.sampled_from(["cpu", "whole", "frac", "ds"]))
        gpus, frac = 0, 0.0
        if kind == "whole" and n.gpu_count:
            gpus = draw(st.integers(1, 2))
            idle = [g for g, f in enumerate(u["dev"]) if f >= 1.0]
            if len(idle) < gpus:
                continue
            for g in idle[:gpus]:
                u["dev"][g] = 0.0
        elif kind == "frac" and n.gpu_count:
            frac = draw(st.sampled_from([0.25, 0.5, 0.6]))
            fits = [g for g, f in enumerate(u["dev"]) if f >= frac - 1e-9]
            if not fits:
                continue
            u["dev"][min(fits, key=lambda g: u["dev"][g])] -= frac
        if u["cpu"] + cpu > n.allocatable["cpu"] or u["memory"] + mem > n.allocatable["memory"]:
            continue
        u["cpu"] += cpu
        u["memory"] += mem
        tier = draw(st.sampled_from(["batch", "training", "serving", "interactive"]))
        pods.append(pod(
            f"p{j}", n.name, cpu, mem, gpus=gpus, frac=frac, tier="system" if kind == "ds" else tier,
            owner="DaemonSet" if kind == "ds" else draw(st.sampled_from(["Job", "Job", "Deployment", None])),
            do_not_disrupt=draw(st.integers(0, 6)) == 0, pdb=draw(st.sampled_from([None, None, "pa", "pb"])),
            node_selector={"zone": "a"} if draw(st.integers(0, 4)) == 0 else {},
            tolerations=(Toleration("dedicated", "Exists"),) if draw(st.booleans()) else (),
        ))
    return nodes, pods, {"pa": draw(st.integers(0, 2)), "pb": draw(st.integers(0, 2))}


def _devices_ok(ndev: int, ps: list[PodPlacement]) -> bool:
    """Brute force: can the fractions be assigned to the devices left after whole GPUs?"""
    free = ndev - sum(p.whole_gpus for p in ps)
    fr = [p.gpu_fraction for p in ps if p.gpu_fraction > 0]
    if free < 0:
        return False
    if not fr:
        return True
    if free == 0:
        return False
    for assign in product(range(free), repeat=len(fr)):
        load = [0.0] * free
        for f, g in zip(fr, assign, strict=True):
            load[g] += f
        if max(load) <= 1.0 + 1e-9:
            return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), st.booleans(), st.booleans())
def test_packer_properties(pool: tuple, use_cp: bool, allow_serving: bool) -> None:
    nodes, pods, pdb = pool
    cfg = PackingSettings(use_cp_sat=use_cp, time_limit_s=0.3, allow_serving_moves=allow_serving)
    plan = pack_pool(nodes, pods, cfg, pdb_allowed=pdb)
    by_name = {n.name: n for n in nodes}
    freed = set(plan.freed_nodes)
    final: dict[str, list[PodPlacement]] = {n.name: [] for n in nodes}
    evictions = {"pa": 0, "pb": 0}
    for p in pods:
        dest = plan.assignment[p.key]
        if dest != p.node:
            # nothing unmovable moved
            assert not p.is_daemonset and not p.do_not_disrupt and p.owner_kind is not None
            assert p.tier != "serving" or allow_serving
            # no scheduling constraint violated
            d = by_name[dest]
            assert not d.unschedulable
            assert all(d.labels.get(k) == v for k, v in p.node_selector.items())
            assert all(any(t.tolerates(x) for t in p.tolerations) for x in d.taints)
            if p.gpu_equiv > 0:
                assert d.gpu_model == by_name[p.node].gpu_model
            if p.pdb:
                evictions[p.pdb] += 1
        if not (p.is_daemonset and p.node in freed):
            assert dest not in freed
            final[dest].append(p)
    assert all(evictions[k] <= pdb[k] for k in evictions)
    # no node over any capacity, device by device
    for name, ps in final.items():
        n = by_name[name]
        for res in ("cpu", "memory", "nvidia.com/gpu"):
            assert sum(p.requests.get(res, 0.0) for p in ps) <= n.allocatable.get(res, 0.0) + 1e-6
        assert _devices_ok(n.gpu_count, ps)
    # never below the lower bound, never worse than doing nothing
    work = [p for p in pods if not p.is_daemonset]
    lb = 0 if not work else max(
        1,
        math.ceil(sum(p.gpu_equiv for p in work) / max(max(n.gpu_count for n in nodes), 1) - 1e-9),
        math.ceil(sum(p.requests["cpu"] for p in work) / max(n.allocatable["cpu"] for n in nodes) - 1e-9),
        math.ceil(sum(p.requests["memory"] for p in work) / max(n.allocatable["memory"] for n in nodes) - 1e-9),
    )
    # the packer's bound (gpufinops.capacity: per-device fit, mixed node sizes) is at least the plain
    # volume bound, and a lower bound: never above what the plan itself reaches
    assert lb <= plan.lower_bound <= len(nodes) - len(freed)
    assert plan.nodes_after <= plan.nodes_before and plan.hourly_savings_usd >= 0
    assert plan.hourly_savings_usd == pytest.approx(sum(by_name[n].hourly_price_usd for n in freed))


def test_the_lower_bound_counts_devices_and_mixed_node_sizes():
    import numpy as np

    from gpufinops.capacity import device_lower_bound, mixed_pool_lower_bound

    # three 0.6 shares cannot pair up: 3 devices, not ⌈1.8⌉ = 2; small shares fill the big ones' room
    assert device_lower_bound(0, [0.6, 0.6, 0.6]) == 3
    assert device_lower_bound(2, [0.6, 0.4, 0.3]) == 2 + 1 + 1
    assert device_lower_bound(0, [0.6, 0.4]) == 1
    # a pool of one 8-GPU and three 2-GPU nodes: 11 GPUs need 3 nodes (8+2+2), not ⌈11/8⌉ = 2
    caps = np.array([[8, 96, 1], [2, 96, 1], [2, 96, 1], [2, 96, 1]], dtype=float)
    assert mixed_pool_lower_bound(caps, (11, 10, 0)) == 3
    assert mixed_pool_lower_bound(caps, (15, 10, 0)) == -1


def test_the_device_bound_keeps_small_shares_out_of_the_slivers_big_ones_leave():
    from gpufinops.capacity import device_lower_bound

    # 0.81 leaves 0.19 on its device: a 0.3 share cannot join either big one (the α = ½ count said 2)
    assert device_lower_bound(0, [0.81, 0.81, 0.3]) == 3
    # ...but a 0.19 share can: two devices hold 0.81 + 0.19 and 0.81 + 0.19
    assert device_lower_bound(0, [0.81, 0.81, 0.19, 0.19]) == 2
    # shares in (½, 1 − α] still leave their room to the shares of at least α
    assert device_lower_bound(1, [0.6, 0.6, 0.4, 0.4, 0.3]) == 1 + 3


def _min_devices(shares: list[float]) -> int:
    """Exact bin packing of a few shares into unit devices (every set partition, by recursion)."""
    best = len(shares)

    def go(k: int, loads: list[float]) -> None:
        nonlocal best
        if len(loads) >= best:
            return
        if k == len(shares):
            best = len(loads)
            return
        for g in range(len(loads)):
            if loads[g] + shares[k] <= 1.0 + 1e-9:
                loads[g] += shares[k]
                go(k + 1, loads)
                loads[g] -= shares[k]
        go(k + 1, [*loads, shares[k]])

    go(0, [])
    return best


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.05, 0.16, 0.19, 0.25, 0.3, 0.32, 0.34, 0.4, 0.47, 0.5, 0.55, 0.59, 0.65, 0.81, 0.95]),
                min_size=1, max_size=7), st.integers(0, 3))
def test_the_device_bound_never_exceeds_an_exact_packing(shares: list[float], whole: int) -> None:
    from gpufinops.capacity import device_lower_bound

    exact = whole + _min_devices(sorted(shares, reverse=True))
    l2 = device_lower_bound(whole, shares)
    assert math.ceil(whole + sum(shares) - 1e-9) <= l2 <= device_lower_bound(whole, shares, pattern_lp=True) <= exact


def test_the_pattern_lp_counts_what_no_threshold_sees():
    from gpufinops.capacity import device_lower_bound, pattern_lp_bound

    # five 0.4 shares: at most two per device, so 2.5 → 3 devices; the volume (and L2) say 2
    assert device_lower_bound(0, [0.4] * 5) == 2
    assert pattern_lp_bound([0.4] * 5) == 3 == device_lower_bound(0, [0.4] * 5, pattern_lp=True)
    # 0.81 and 0.19 pair exactly: the LP finds the perfect packing's count, no more
    assert pattern_lp_bound([0.81] * 4 + [0.19] * 4) == 4
    assert pattern_lp_bound([]) == 0


def test_plan_snapshot_passes_the_recommenders_eviction_cap() -> None:
    from datetime import UTC, datetime

    from recommender.model import ClusterSnapshot
    from recommender.strategies.consolidate import ConsolidateSettings, plan_snapshot

    nodes, pods = _blocked_pool()
    snap = ClusterSnapshot("c1", datetime(2026, 1, 1, tzinfo=UTC), tuple(nodes), tuple(pods))
    assert [p.freed_nodes for p in plan_snapshot(snap, SEARCH_ONLY)] == [["n0"]]
    assert [p.freed_nodes for p in plan_snapshot(snap, SEARCH_ONLY, 1.0)] == [[]]
    assert ConsolidateSettings().max_evictions_per_node_freed == 20.0  # the bench's cap


@st.composite
def gpu_pools(draw: st.DrawFn) -> tuple[list[NodeShape], list[PodPlacement]]:
    """GPU nodes of one model with whole and shared GPUs placed device by device, a few pods
    pinned (do-not-disrupt): the cases where pods block devices and ejections help."""
    nodes = [node(f"n{i}", cpu=8, gpus=draw(st.sampled_from([2, 4])), model="T4") for i in range(draw(st.integers(3, 6)))]
    pods: list[PodPlacement] = []
    for n in nodes:
        dev, cpu = [1.0] * n.gpu_count, 0.0
        for j in range(draw(st.integers(1, 5))):
            c, share = draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([1.0, 0.3, 0.5, 0.6, 0.81]))
            fits = [g for g, f in enumerate(dev) if f >= share - 1e-9]
            if not fits or cpu + c > 8:
                continue
            g = min(fits, key=lambda g: dev[g])
            dev[g] -= share
            cpu += c
            pinned = draw(st.integers(0, 4)) == 0
            pods.append(pod(f"{n.name}p{j}", n.name, c, gpus=1 if share == 1.0 else 0, frac=0.0 if share == 1.0 else share,
                            do_not_disrupt=pinned))
    return nodes, pods


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu_pools(), st.booleans())
def test_the_search_and_the_swaps_keep_the_state_exact(pool: tuple, repack_first: bool) -> None:
    import time

    import numpy as np

    from recommender.packing import _drain_ffd, _empty_nodes, _fewer_evictions, _plan_of, _repack, _State

    nodes, pods = pool
    cfg = PackingSettings(ejection_tries=6)
    s = _State(nodes, pods, cfg, {})
    if not (repack_first and _repack(s, "gpu")):
        _drain_ffd(s)
    _empty_nodes(s, cfg, 20, time.monotonic() + 5)
    _fewer_evictions(s)
    # the incremental bookkeeping equals a recount from the assignment
    used = np.zeros_like(s.cap)
    free = np.where(s.dev_free >= -0.5, 1.0, -1.0)
    for j in range(len(pods)):
        assert j in s.pods_on[s.assign[j]] and s.open[s.assign[j]]
        used[s.assign[j]] += s.req[j]
        # every GPU pod holds its devices (a pod with none would vanish from the device check)
        assert len(s.devs[j]) == (max(int(s.whole[j]), 1 if s.frac[j] > 0 else 0) if s.device_level[s.assign[j]] else 0)
        for g in s.devs[j]:
            free[s.assign[j], g] -= 1.0 if s.whole[j] > 0 else s.frac[j]
    assert np.allclose(used, s.used) and np.allclose(free, s.dev_free)
    assert sum(len(x) for x in s.pods_on) == len(pods)
    plan = _plan_of(s, nodes, pods, "search", 0)
    assert check_plan(nodes, pods, plan, cfg, {}) == []


def test_a_drain_that_fails_puts_the_pods_back_on_the_devices_they_held() -> None:
    """Found by the property test above: n2's shares (0.3 + 0.6 on one device, 0.5 + 0.3 on the
    other) start to move to n3 and do not all fit; placed back one by one best fit, the 0.6 found
    no device and the plan failed the device check. The rollback now restores the devices."""
    import numpy as np

    from recommender.packing import _drain_ffd, _State

    nodes = [node("n0", cpu=8, gpus=4, model="T4"), node("n1", cpu=8, gpus=4, model="T4"),
             node("n2", cpu=8, gpus=2, model="T4"), node("n3", cpu=8, gpus=2, model="T4")]
    pods = [pod(f"n0p{k}", "n0", c, gpus=1, do_not_disrupt=True) for k, c in enumerate([1, 2, 3])]
    pods += [pod(f"n1p{k}", "n1", 1, gpus=1, do_not_disrupt=True) for k in range(4)]
    pods += [pod(f"n2p{k}", "n2", c, gpus=0, frac=f) for k, (c, f) in enumerate([(1, 0.3), (1, 0.5), (2, 0.6), (1, 0.3)])]
    pods += [pod("n3p0", "n3", 1, gpus=0, frac=0.3), pod("n3p1", "n3", 2, gpus=0, frac=0.5)]
    s = _State(nodes, pods, PackingSettings(), {})
    before = ([list(d) for d in s.devs], s.dev_free.copy())
    _drain_ffd(s)
    assert all(s.devs[j] for j in range(7, len(pods)))  # every share holds a device
    assert list(s.assign) == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3]  # nothing could drain
    assert [list(d) for d in s.devs] == before[0] and np.allclose(s.dev_free, before[1])
