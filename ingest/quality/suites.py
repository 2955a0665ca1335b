"""One expectation suite per landing table (``ingest/schema.py``): the rules a batch must meet.

Not-null and key uniqueness come from the schema's ``required`` and ``key``; the rest is what
real bad data looks like (a utilisation ratio above 1, a negative wattage, a made-up phase).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from gpufinops.project import PROJECT_DIR
from ingest.quality.checks import (
    Check,
    InRange,
    InSet,
    MapValueLength,
    NotNull,
    PairOrdered,
    QuantitiesInRange,
    ResourceQuantities,
    TimeInRange,
    UniqueKey,
    UniqueValue,
)
from ingest.schema import TABLES

__all__ = ["TableSuite", "SUITES", "get_suite", "build_suites", "CAPACITY_TYPES", "POD_PHASES", "QOS_CLASSES",
           "CHARGE_CATEGORIES", "WHOLE_DEVICE_RESOURCES", "mig_profile_names"]

CAPACITY_TYPES = ("on_demand", "spot", "reserved")
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")
# FOCUS 1.0-1.3 ChargeCategory values.
CHARGE_CATEGORIES = ("Usage", "Purchase", "Tax", "Credit", "Adjustment")
# Device-plugin resources that count whole devices: a request is a whole number.
WHOLE_DEVICE_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi", "aws.amazon.com/neuron")
_MIG_SEED = PROJECT_DIR / "seeds" / "mig_profiles.csv"  # a checkout or the installed dbt project
# Times no sample can have: DuckDB and Python stop at year 9999; a run window needs room after it.
_MAX_TIME = datetime(2200, 1, 1, tzinfo=UTC)


@lru_cache(maxsize=1)
def mig_profile_names() -> tuple[str, ...]:
    """The MIG profiles the warehouse knows (the dbt seed ``seeds/mig_profiles.csv``)."""
    if not _MIG_SEED.is_file():
        return ()
    with _MIG_SEED.open(newline="") as fh:
        return tuple(sorted({row["profile"] for row in csv.DictReader(fh)}))


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


def build_suites(limits: Any = None) -> dict[str, TableSuite]:
    """The suites with the sane ranges of ``limits`` (``Settings.limits``; None: the defaults)."""
    if limits is None:
        from gpufinops.settings import LimitSettings

        limits = LimitSettings()
    price, line, qty = limits.max_price_per_hour, limits.max_line_cost, limits.max_quantity
    t0 = limits.min_time
    migs = mig_profile_names()
    label_len = limits.max_label_value_chars
    devices = [ResourceQuantities(c, WHOLE_DEVICE_RESOURCES, limits.max_gpus_per_container, migs) for c in _QUANTITY_COLUMNS]
    return {
        s.table: s
        for s in [
            _suite(
                "k8s_nodes",
                TimeInRange("snapshot_ts", t0, _MAX_TIME),
                InSet("capacity_type", CAPACITY_TYPES),
                InRange("gpu_count", min_value=0), InRange("gpu_count", max_value=1024),
                InRange("gpu_memory_mib", min_value=0), InRange("gpu_memory_mib", max_value=qty),
                InRange("gpu_replicas", min_value=1), InRange("gpu_replicas", max_value=1024),  # null (not time-sliced) passes
                QuantitiesInRange("capacity"),
                QuantitiesInRange("allocatable"),
                QuantitiesInRange("capacity", min_value=float("-inf"), max_value=qty),
                QuantitiesInRange("allocatable", min_value=float("-inf"), max_value=qty),
                ResourceQuantities("capacity", (), 0, migs),
                MapValueLength("labels", label_len),
            ),
            _suite(
                "k8s_pods",
                TimeInRange("snapshot_ts", t0, _MAX_TIME),
                InSet("phase", POD_PHASES),
                InSet("qos_class", QOS_CLASSES),
                *(QuantitiesInRange(c) for c in _QUANTITY_COLUMNS),
                *(QuantitiesInRange(c, min_value=float("-inf"), max_value=qty) for c in _QUANTITY_COLUMNS),
                *devices,
                MapValueLength("labels", label_len),
                UniqueValue(("snapshot_ts", "uid"), show=("namespace", "pod")),
            ),
            _suite("k8s_namespaces", TimeInRange("snapshot_ts", t0, _MAX_TIME), MapValueLength("labels", label_len)),
            _suite(
                "gpu_samples",
                TimeInRange("ts", t0, _MAX_TIME),
                InRange("gr_engine_active", 0, 1),
                InRange("gpu_util", 0, 100),
                InRange("tensor_active", 0, 1),
                InRange("fb_used_mib", min_value=0), InRange("fb_used_mib", max_value=qty, check_nan=False),
                InRange("fb_free_mib", min_value=0), InRange("fb_free_mib", max_value=qty, check_nan=False),
                InRange("power_w", min_value=0), InRange("power_w", max_value=qty, check_nan=False),
                InRange("gpu", min_value=0), InRange("gpu", max_value=1024),
                InRange("mig_instance", min_value=0), InRange("mig_instance", max_value=1024),
                *((InSet("mig_profile", migs),) if migs else ()),
            ),
            _suite(
                "container_usage",
                TimeInRange("ts", t0, _MAX_TIME),
                InRange("cpu_cores", min_value=0), InRange("cpu_cores", max_value=qty, check_nan=False),
                InRange("memory_working_set_bytes", min_value=0),
                InRange("memory_working_set_bytes", max_value=qty, check_nan=False),
            ),
            _suite(
                "serving_requests",
                TimeInRange("ts", t0, _MAX_TIME),
                InRange("requests_total", min_value=0), InRange("requests_total", max_value=qty, check_nan=False),
                InRange("prompt_tokens_total", min_value=0), InRange("prompt_tokens_total", max_value=qty, check_nan=False),
                InRange("generation_tokens_total", min_value=0),
                InRange("generation_tokens_total", max_value=qty, check_nan=False),
            ),
            _suite(
                "applied_changes",
                TimeInRange("applied_at", t0, _MAX_TIME),
                InSet("status", ("applied", "verified", "rolled_back", "failed")),
                PairOrdered("verified_at", "applied_at", or_equal=True),
                PairOrdered("ended_at", "applied_at", or_equal=True),
                InRange("est_monthly_savings_usd", min_value=-line, max_value=line),
            ),
            _suite(
                "prices",
                InRange("usd_per_hour", min_value=0, strict_min=True),
                InRange("usd_per_hour", max_value=price, check_nan=False),
                InRange("gpu_usd_per_hour", min_value=0, strict_min=True),
                InRange("gpu_usd_per_hour", max_value=price, check_nan=False),
                InSet("capacity_type", CAPACITY_TYPES),
                InSet("currency", ("USD",)),
                TimeInRange("effective_from", t0, _MAX_TIME),
                PairOrdered("effective_to", "effective_from"),
            ),
            _suite(
                "billing_focus",
                TimeInRange("ChargePeriodStart", t0, _MAX_TIME),
                PairOrdered("ChargePeriodEnd", "ChargePeriodStart", or_equal=True),
                PairOrdered("BillingPeriodEnd", "BillingPeriodStart"),
                InSet("ChargeCategory", CHARGE_CATEGORIES),
                InSet("BillingCurrency", ("USD",)),
                *(InRange(c, min_value=-line, max_value=line) for c in ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")),
                *(InRange(c, min_value=-qty, max_value=qty) for c in ("ConsumedQuantity", "PricingQuantity")),
            ),
        ]
    }


SUITES: dict[str, TableSuite] = build_suites()


def get_suite(table: str) -> TableSuite:
    try:
        return SUITES[table]
    except KeyError:
        raise KeyError(f"no data-quality suite for table {table!r}; known: {', '.join(SUITES)}") from None
