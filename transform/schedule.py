"""The order in which a full build's dbt threads take ready nodes: longest remaining chain first.

dbt's queue (``dbt.graph.queue.GraphQueue``) hands a free thread the ready node of the lowest depth in
the DAG. On the 1,000-node month that started the large marts late, and the build ended with one of
them running alone while the other thread idled (docs/bench.md). Here a node's score is minus the
seconds of the longest chain from it to the end of the DAG, each node weighed by its seconds in the
last full build (``<home>/dbt/node_seconds.json``, written after each full build's model phase; before
the first, the bench's, :data:`PRIOR`); a node not in it weighs :data:`UNKNOWN_SECONDS`.

dbt's run loop takes a node off the queue as soon as one is ready and hands it to its thread pool,
which queues it first in, first out behind the running ones: the queue's order decided only among
nodes that became ready at once. So while the order is ours, the loop also waits for a free thread
before it takes the next node (``GraphQueue.get``: at most ``threads`` nodes handed out and not done).

Only the order changes: which nodes run, and that a node waits for its parents, is dbt's.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

NODE_SECONDS = "node_seconds.json"  # under <home>/dbt
# the models' seconds in a full build of the 1,000-node bench month (docs/bench.md; nodes under 0.1 s
# left out): the order of a home's first full build
PRIOR = Path(__file__).with_name("node_seconds_prior.json")
UNKNOWN_SECONDS = 0.05
_log = logging.getLogger(__name__)


def _read(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def load_node_seconds(work: Path, prior: Path | None = PRIOR) -> dict[str, float]:
    """The seconds of each model and seed of the last full build, by name; before a home's first full
    build, ``prior`` (the 1,000-node bench's, shipped); {} when neither is readable."""
    return _read(work / NODE_SECONDS) or (_read(prior) if prior is not None else {})


def record_node_seconds(work: Path, nodes: Iterable[Any]) -> None:
    """Keep the seconds of the models and seeds that ran (objects with name, resource_type, status,
    seconds) for the next full build's order; written whole or not at all."""
    seconds = {n.name: round(n.seconds, 3) for n in nodes
               if n.resource_type in ("model", "seed") and n.status == "success"}
    if not seconds:
        return
    tmp = work / (NODE_SECONDS + ".tmp")
    tmp.write_text(json.dumps(seconds, sort_keys=True))
    tmp.replace(work / NODE_SECONDS)


def critical_path_scores(graph: Any, seconds: Mapping[str, float]) -> dict[str, float]:
    """Per node of ``graph`` (a networkx DiGraph of dbt unique ids, edges parent -> child): minus the
    seconds of the longest chain from the node to a node without children, itself included. Lower
    runs first, as in dbt's queue."""
    import networkx as nx

    chain: dict[str, float] = {}
    for node in reversed(list(nx.topological_sort(graph))):
        own = seconds.get(str(node).rsplit(".", 1)[-1], UNKNOWN_SECONDS)
        chain[node] = own + max((chain[c] for c in graph.successors(node)), default=0.0)
    return {node: -length for node, length in chain.items()}


@contextlib.contextmanager
def longest_chain_first(seconds: Mapping[str, float], threads: int) -> Iterator[bool]:
    """While open, dbt's queues order ready nodes by :func:`critical_path_scores` over ``seconds`` and
    hand one out only while fewer than ``threads`` run. Yields whether it could (no record, or a dbt
    whose queue lacks what this replaces: dbt's order)."""
    try:
        from dbt.graph.queue import GraphQueue
    except ImportError:  # pragma: no cover - dbt is a dependency
        yield False
        return
    get_scores, get = GraphQueue.__dict__.get("_get_scores"), GraphQueue.__dict__.get("get")
    if not seconds or get_scores is None or get is None:
        yield False
        return

    def _get_scores(self: Any, graph: Any) -> dict[str, float]:
        return critical_path_scores(graph, seconds)

    def _get(self: Any, block: bool = True, timeout: float | None = None) -> Any:
        with self.lock:
            while len(self.in_progress) >= threads:
                self.some_task_done.wait()
        return get(self, block=block, timeout=timeout)

    GraphQueue._get_scores, GraphQueue.get = _get_scores, _get  # type: ignore[method-assign,assignment]
    try:
        yield True
    finally:
        GraphQueue._get_scores, GraphQueue.get = get_scores, get  # type: ignore[method-assign,assignment]
