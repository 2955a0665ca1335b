"""The API's routers, one module per resource; ``ROUTERS`` is the order they are mounted in."""

from __future__ import annotations

from api.routes import audit, budgets, changes, clusters, exports, health, recommendations, showback, whatif, workloads

__all__ = ["ROUTERS"]

ROUTERS = [
    health.router,
    workloads.router,
    clusters.router,
    whatif.router,
    showback.router,
    recommendations.router,
    changes.router,
    audit.router,
    exports.router,
    budgets.router,
]
