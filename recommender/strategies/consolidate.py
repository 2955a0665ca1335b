"""``consolidate_nodes``: per cluster and node pool at the latest snapshot, the packer's plan."""

from __future__ import annotations

from collections import defaultdict

from pydantic import Field

from recommender.model import ClusterSnapshot, Recommendation, RecommenderInput
from recommender.packing import PackingPlan, PackingSettings, pack_pool
from recommender.strategies.base import Strategy, StrategySettings, register

__all__ = ["ConsolidateSettings", "ConsolidateNodes", "plan_snapshot"]


class ConsolidateSettings(StrategySettings):
    packing: PackingSettings = Field(default_factory=lambda: PackingSettings())
    max_evictions_per_node_freed: float = Field(default=20.0, gt=0, description="plans that churn more are not proposed")


def plan_snapshot(snap: ClusterSnapshot, settings: PackingSettings,
                  max_evictions_per_node_freed: float | None = None) -> list[PackingPlan]:
    """One plan per node pool of the snapshot (each the best within the eviction cap, when one is given)."""
    pools: dict[str, list] = defaultdict(list)
    for n in snap.nodes:
        pools[n.node_pool or "(none)"].append(n)
    plans = []
    for _pool, nodes in sorted(pools.items()):
        names = {n.name for n in nodes}
        plans.append(pack_pool(nodes, [p for p in snap.pods if p.node in names], settings, snap.pdb_allowed,
                               max_evictions_per_node_freed))
    return plans


@register
class ConsolidateNodes(Strategy[ConsolidateSettings]):
    name = "consolidate_nodes"
    kinds = ("consolidate_nodes",)
    settings_model = ConsolidateSettings

    def plan(self, data: RecommenderInput) -> list[Recommendation]:
        out = []
        for snap in data.snapshots:
            for plan in plan_snapshot(snap, self.settings.packing, self.settings.max_evictions_per_node_freed):
                if not plan.freed_nodes or plan.evictions_per_node_freed > self.settings.max_evictions_per_node_freed:
                    continue
                pool = plan.node_pool
                out.append(Recommendation(
                    kind="consolidate_nodes", cluster=snap.cluster, namespace=None, workload=f"nodepool/{pool}",
                    tier=None, id_extra=(pool,),
                    current={"node_pool": pool, "nodes": plan.nodes_before},
                    proposed={"nodes": plan.nodes_after, "freed_nodes": plan.freed_nodes,
                              "moves": [{"pod": f"{m.namespace}/{m.pod}", "from": m.from_node, "to": m.to_node}
                                        for m in plan.moves]},
                    evidence={"snapshot_at": snap.at.isoformat(), "lower_bound": plan.lower_bound, "gap": plan.gap,
                              "evictions": len(plan.moves),
                              "evictions_per_node_freed": round(plan.evictions_per_node_freed, 2),
                              "unmovable_pods": plan.unmovable_pods, "solver": plan.solver,
                              "hourly_savings_usd": round(plan.hourly_savings_usd, 4), **plan.stats},
                    est_monthly_savings_usd=plan.monthly_savings_usd,
                    confidence=0.8 if plan.moves else 0.95, risk="low" if not plan.moves else "medium",
                    created_at=data.now,
                ))
        return out
