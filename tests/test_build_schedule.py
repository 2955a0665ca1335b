"""The full build's order (transform/schedule.py): longest remaining chain first, a node handed out only
to a free thread, the data tests after the models, and a failed test still failing the build."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import duckdb
import networkx as nx
import pytest
from dbt.graph.queue import GraphQueue

from gpufinops.warehouse import last_build, published_version
from transform import schedule

pytestmark = pytest.mark.timeout(600)


def _graph() -> nx.DiGraph:
    #   a (1 s) -> b (10 s) -> d (1 s)
    #   c (1 s) -> e (1 s)
    #   f (3 s)
    g = nx.DiGraph()
    g.add_edges_from([("model.p.a", "model.p.b"), ("model.p.b", "model.p.d"), ("model.p.c", "model.p.e")])
    g.add_node("model.p.f")
    return g


SECONDS = {"a": 1.0, "b": 10.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 3.0}


def test_a_node_scores_minus_its_longest_chain_to_the_end():
    scores = schedule.critical_path_scores(_graph(), SECONDS)
    assert scores == {"model.p.a": -12.0, "model.p.b": -11.0, "model.p.d": -1.0,
                      "model.p.c": -2.0, "model.p.e": -1.0, "model.p.f": -3.0}
    # a node the record does not know weighs UNKNOWN_SECONDS
    assert schedule.critical_path_scores(_graph(), {})["model.p.a"] == pytest.approx(-3 * schedule.UNKNOWN_SECONDS)


class _Manifest:
    def expect(self, node_id: str) -> object:
        return type("Node", (), {"unique_id": node_id})()


def test_the_queue_hands_out_the_longest_chain_first_and_only_to_a_free_thread():
    with schedule.longest_chain_first(SECONDS, threads=2) as applied:
        assert applied
        queue = GraphQueue(_graph(), _Manifest(), set(_graph().nodes))
        # ready: a (chain 12 s), f (3 s), c (2 s); dbt's own order is by depth only (a, c, f tie at 0)
        assert [queue.get().unique_id, queue.get().unique_id] == ["model.p.a", "model.p.f"]
        taken: list[str] = []
        waiter = threading.Thread(target=lambda: taken.append(queue.get().unique_id))
        waiter.start()
        time.sleep(0.3)
        assert not taken, "a third node was handed out while two ran on two threads"
        queue.mark_done("model.p.a")  # b becomes ready, and outranks c
        waiter.join(timeout=5)
        assert taken == ["model.p.b"]
    # closed: dbt's own methods again
    assert GraphQueue.__dict__["_get_scores"].__name__ == "_get_scores"
    assert GraphQueue.__dict__["get"].__qualname__ == "GraphQueue.get"


def test_without_a_record_dbt_keeps_its_own_order():
    with schedule.longest_chain_first({}, threads=2) as applied:
        assert not applied
        assert GraphQueue.__dict__["get"].__qualname__ == "GraphQueue.get"


def test_the_record_is_written_whole_and_read_back(tmp_path: Path):
    from transform.runner import NodeResult

    assert schedule.load_node_seconds(tmp_path, prior=None) == {}
    (tmp_path / schedule.NODE_SECONDS).write_text("{not json")
    assert schedule.load_node_seconds(tmp_path, prior=None) == {}
    # before a home's first full build: the shipped prior, which weighs the big marts
    prior = schedule.load_node_seconds(tmp_path)
    assert prior == schedule.load_node_seconds(tmp_path / "nowhere") and prior["fct_gpu_allocation_hourly"] > 5
    schedule.record_node_seconds(tmp_path, [
        NodeResult("m", "model", "success", 2.5), NodeResult("s", "seed", "success", 0.25),
        NodeResult("t", "test", "pass", 9.0), NodeResult("x", "model", "error", 1.0)])
    assert schedule.load_node_seconds(tmp_path) == {"m": 2.5, "s": 0.25}  # the home's own record first
    assert not list(tmp_path.glob("*.tmp"))


def test_a_full_build_records_its_models_and_runs_its_tests_after(small_lake_build):
    settings, result, _ = small_lake_build
    work = Path(settings.home) / "dbt"
    recorded = schedule.load_node_seconds(work)
    assert "fct_gpu_allocation_hourly" in recorded and all(v >= 0 for v in recorded.values())
    assert not any(name.startswith(("not_null_", "unique_")) for name in recorded)
    # the JSON artifacts are the models' (the test invocation writes none)
    results = json.loads((work / "target" / "run_results.json").read_text())["results"]
    assert results and all(r["unique_id"].split(".")[0] in ("model", "seed", "operation") for r in results)
    assert sum(r["unique_id"].startswith("model.") for r in results) >= 20
    assert result.count("test", "pass") >= 50
    # the tests invocation kept the full build's window: empty, so they tested whole tables (its
    # on-run-start hook would have recorded the newest hours minus the lookback)
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    try:
        assert con.execute("select count(*) from _build_window where since is not null").fetchone() == (0,)
    finally:
        con.close()


def test_a_failed_test_after_the_models_still_fails_the_full_build(fleet_copy):
    """A full build whose conservation tests fail (an impossible tolerance) publishes nothing."""
    from transform import BuildFailed, run_build

    link = Path(fleet_copy.settings.warehouse_path)
    before = published_version(link)
    with pytest.raises(BuildFailed) as err:
        run_build(fleet_copy.settings, full_refresh=True,
                  extra_vars={"conservation_abs_tol": -1.0, "conservation_rel_tol": -1.0})
    assert "live warehouse is unchanged" in str(err.value)
    assert published_version(link) == before
    record = last_build(link)
    assert record["status"] == "failed" and any("conservation" in f for f in record["failed"])
    # the models all built before the tests ran: none was skipped for a failed test
    assert err.value.result.count("model", "skipped") == 0 and err.value.result.count("model", "success") >= 20


def test_a_model_that_reads_a_seed_by_name_runs_after_it(fleet):
    """int_namespace_attribution reads the namespace_teams seed through optional_seed (by name, not
    ref): its depends_on line orders it after the seed, whatever order the full build takes. Built
    before the seed, it had no mapping, and the full build's hours kept 'unassigned' for the seed's
    namespaces (the fixture fleet's later incremental hours rebuilt it right: the two disagreed)."""
    import csv

    from gpufinops.project import PROJECT_DIR

    with open(PROJECT_DIR / "seeds" / "namespace_teams.csv", newline="") as f:
        mapping = {r["namespace"]: (r["team"], r["tenant"]) for r in csv.DictReader(f)}
    con = duckdb.connect(str(fleet.settings.warehouse_path), read_only=True)
    try:
        rows = con.execute("select namespace, team_seed, tenant_seed from int_namespace_attribution").fetchall()
        # every hour of the allocation mart, the full build's included, carries its pod's attribution
        (mismatched,) = con.execute("""
            select count(*) from fct_gpu_allocation_hourly as f
            inner join int_pod_attributes as a on f.cluster = a.cluster and f.pod_uid = a.pod_uid
            where f.team <> coalesce(a.team, 'unassigned') or f.tenant <> coalesce(a.tenant, 'unassigned')""").fetchone()
        full_build_hours = con.execute("select count(distinct hour) from fct_gpu_allocation_hourly").fetchone()[0]
    finally:
        con.close()
    seeded = [(ns, team, tenant) for ns, team, tenant in rows if ns in mapping]
    assert seeded, "the fixture fleet has none of the seed's namespaces"
    assert all((team, tenant) == mapping[ns] for ns, team, tenant in seeded), seeded
    assert full_build_hours > 1 and mismatched == 0
