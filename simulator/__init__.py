"""Placement simulator: replays a workload onto a node inventory under scheduler policies.

It reproduces the experiments of the FGD paper (Weng et al., USENIX ATC '23) and their simulator
(hkust-adsl/kubernetes-scheduler-simulator): the same policies, arrival protocol and
fragmentation measure, the latter taken from :mod:`gpufinops.capacity` so the product's
fragmentation is the one validated here. Domain layer: imports the kernel only.
"""

from simulator.engine import POLICIES, RunResult, run_once
from simulator.inputs import Inventory, Workload, load_openb_nodes, load_openb_pods
from simulator.report import simulate

__all__ = ["POLICIES", "RunResult", "run_once", "Inventory", "Workload", "load_openb_nodes", "load_openb_pods",
           "simulate"]
