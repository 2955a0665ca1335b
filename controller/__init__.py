"""The controller: turns an approved change into Kubernetes requests, applies them, verifies, rolls back.

``planner`` is pure (change + live objects -> ops); ``kube`` is the only module that talks to the API
server; ``executor`` runs the apply sequence through the change service; ``verify`` compares live
objects with what the ops expect.
"""

from controller.planner import Op, PlanRefused, format_plan, plan

__all__ = ["Op", "PlanRefused", "format_plan", "plan"]
