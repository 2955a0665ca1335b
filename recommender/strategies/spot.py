"""``move_to_spot``: checkpointed training on on-demand nodes can survive spot interruptions."""

from __future__ import annotations

from pydantic import Field

from recommender.model import HOURS_PER_MONTH, Recommendation, RecommenderInput
from recommender.strategies.base import Strategy, StrategySettings, register

__all__ = ["SpotSettings", "MoveToSpot"]


class SpotSettings(StrategySettings):
    default_spot_discount: float = Field(default=0.6, ge=0, lt=1, description="used when no spot price is known")
    min_hours: float = Field(default=6, ge=0, description="hours of history before a workload qualifies")


@register
class MoveToSpot(Strategy[SpotSettings]):
    name = "move_to_spot"
    kinds = ("move_to_spot",)
    settings_model = SpotSettings

    def plan(self, data: RecommenderInput) -> list[Recommendation]:
        out = []
        for w in data.gpu_usage:
            if w.tier != "training" or not w.checkpointed or w.capacity_type != "on_demand":
                continue
            recent = w.hourly[-24:]
            if len(w.hourly) < self.settings.min_hours or not recent:
                continue
            rate = sum(h.total_cost_usd for h in recent) / len(recent)
            if w.on_demand_usd_per_hour and w.spot_usd_per_hour:
                discount, basis = 1 - w.spot_usd_per_hour / w.on_demand_usd_per_hour, "price list"
            else:
                discount, basis = self.settings.default_spot_discount, "default discount setting"
            out.append(Recommendation(
                kind="move_to_spot", cluster=w.cluster, namespace=w.namespace, workload=w.workload, tier=w.tier,
                current={"capacity_type": "on_demand", "instance_type": w.instance_type,
                         "usd_per_hour": w.on_demand_usd_per_hour},
                proposed={"capacity_type": "spot", "usd_per_hour": w.spot_usd_per_hour,
                          "node_selector": {"karpenter.sh/capacity-type": "spot"}},
                evidence={"checkpointed": True, "spot_discount": round(discount, 4), "discount_basis": basis,
                          "cost_usd_per_hour": round(rate, 4), "hours_observed": len(w.hourly)},
                est_monthly_savings_usd=rate * discount * HOURS_PER_MONTH,
                confidence=0.8 if basis == "price list" else 0.5, risk="medium", created_at=data.now,
            ))
        return out
