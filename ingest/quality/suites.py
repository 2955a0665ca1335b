"""One expectation suite per landing table (``ingest/schema.py``): the rules a batch must meet.

Not-null and key uniqueness come from the schema's ``required`` and ``key``; the rest is what
real bad data looks like (a utilisation ratio above 1, a negative wattage, a made-up phase).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ingest.quality.checks import Check, InRange, InSet, NotNull, PairOrdered, QuantitiesInRange, UniqueKey
from ingest.schema import TABLES

__all__ = ["TableSuite", "SUITES", "get_suite", "CAPACITY_TYPES", "POD_PHASES", "QOS_CLASSES"]

CAPACITY_TYPES = ("on_demand", "spot", "reserved")
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")


@dataclass(frozen=True)
class TableSuite:
    """The checks of one landing table, in the order their failures are reported."""

    table: str
    checks: tuple[Check, ...]

    @property
    def name(self) -> str:
        return f"landing.{self.table}"

    def to_gx(self) -> Any:
        """The suite as a GX ``ExpectationSuite`` (to print, export as JSON or run with GX alone).

        Nested-quantity checks expect a derived column ``<column>_min`` (each row's smallest
        quantity), which :meth:`Check.frame` computes; GX has no expectation over map values.
        """
        from ingest.quality import _ge

        gxe = _ge.expectations()
        suite = _ge.gx_module().ExpectationSuite(name=self.name)
        for check in self.checks:
            exp = check.expectation(gxe)
            exp.meta = {"check": check.kind, "column": check.label}
            suite.add_expectation(exp)
        return suite


def _suite(table: str, *extra: Check) -> TableSuite:
    t = TABLES[table]
    base: list[Check] = [NotNull(c) for c in t.required]
    return TableSuite(table, (*base, *extra, UniqueKey(t.key)))


_QUANTITY_COLUMNS = ("containers.requests", "containers.limits", "init_containers.requests", "init_containers.limits")

SUITES: dict[str, TableSuite] = {
    s.table: s
    for s in [
        _suite(
            "k8s_nodes",
            InSet("capacity_type", CAPACITY_TYPES),
            InRange("gpu_count", min_value=0),
            InRange("gpu_memory_mib", min_value=0),
            InRange("gpu_replicas", min_value=1),  # null (not time-sliced) passes
            QuantitiesInRange("capacity"),
            QuantitiesInRange("allocatable"),
        ),
        _suite(
            "k8s_pods",
            InSet("phase", POD_PHASES),
            InSet("qos_class", QOS_CLASSES),
            *(QuantitiesInRange(c) for c in _QUANTITY_COLUMNS),
        ),
        _suite("k8s_namespaces"),
        _suite(
            "gpu_samples",
            InRange("gr_engine_active", 0, 1),
            InRange("gpu_util", 0, 100),
            InRange("tensor_active", 0, 1),
            InRange("fb_used_mib", min_value=0),
            InRange("fb_free_mib", min_value=0),
            InRange("power_w", min_value=0),
            InRange("gpu", min_value=0),
            InRange("mig_instance", min_value=0),
        ),
        _suite(
            "container_usage",
            InRange("cpu_cores", min_value=0),
            InRange("memory_working_set_bytes", min_value=0),
        ),
        _suite(
            "serving_requests",
            InRange("requests_total", min_value=0),
            InRange("prompt_tokens_total", min_value=0),
            InRange("generation_tokens_total", min_value=0),
        ),
        _suite(
            "prices",
            InRange("usd_per_hour", min_value=0, strict_min=True),
            InRange("gpu_usd_per_hour", min_value=0, strict_min=True),
            InSet("capacity_type", CAPACITY_TYPES),
            PairOrdered("effective_to", "effective_from"),
        ),
        _suite(
            "billing_focus",
            PairOrdered("ChargePeriodEnd", "ChargePeriodStart", or_equal=True),
            PairOrdered("BillingPeriodEnd", "BillingPeriodStart"),
        ),
    ]
}


def get_suite(table: str) -> TableSuite:
    try:
        return SUITES[table]
    except KeyError:
        raise KeyError(f"no data-quality suite for table {table!r}; known: {', '.join(SUITES)}") from None
