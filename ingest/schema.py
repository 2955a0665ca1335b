"""The landing tables of DESIGN §2 as Arrow schemas: the one definition the lake, the demo, the
ingesters, the data-quality suites and the dbt sources agree on.

Conventions:
- every time is ``timestamp[us, tz=UTC]``;
- resource quantities are parsed at ingest into canonical numbers (CPU in cores, memory and
  storage in bytes, everything else as a count) and kept under their verbatim resource names;
- every row carries ``cluster``, ``ingest_run_id`` and ``ingested_at`` (added by the lake writer).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = ["LandingTable", "TABLES", "TS", "get_table", "RUN_COLUMNS"]

TS = pa.timestamp("us", tz="UTC")
_STR_MAP = pa.map_(pa.string(), pa.string())
_QTY_MAP = pa.map_(pa.string(), pa.float64())
_CONTAINER = pa.struct(
    [
        pa.field("name", pa.string()),
        pa.field("requests", _QTY_MAP),
        pa.field("limits", _QTY_MAP),
    ]
)
_TOLERATION = pa.struct(
    [
        pa.field("key", pa.string()),
        pa.field("operator", pa.string()),
        pa.field("value", pa.string()),
        pa.field("effect", pa.string()),
    ]
)
_TAINT = pa.struct(
    [pa.field("key", pa.string()), pa.field("value", pa.string()), pa.field("effect", pa.string())]
)

RUN_COLUMNS = [
    pa.field("cluster", pa.string(), nullable=False),
    pa.field("ingest_run_id", pa.string(), nullable=False),
    pa.field("ingested_at", TS, nullable=False),
]


@dataclass(frozen=True)
class LandingTable:
    """A landing table: its columns (without the run columns), its time column and its keys."""

    name: str
    schema: pa.Schema
    time_column: str
    key: tuple[str, ...]
    required: tuple[str, ...]

    @property
    def full_schema(self) -> pa.Schema:
        return pa.schema(list(self.schema) + RUN_COLUMNS)


def _t(name: str, fields: list[pa.Field], time_column: str, key: tuple[str, ...], required: tuple[str, ...]) -> LandingTable:
    return LandingTable(name, pa.schema(fields), time_column, key, required)


TABLES: dict[str, LandingTable] = {
    t.name: t
    for t in [
        _t(
            "k8s_nodes",
            [
                pa.field("snapshot_ts", TS),
                pa.field("node", pa.string()),
                pa.field("uid", pa.string()),
                pa.field("provider", pa.string()),  # aws | gcp | azure | unknown, from spec.providerID
                pa.field("provider_id", pa.string()),
                pa.field("instance_type", pa.string()),
                pa.field("region", pa.string()),
                pa.field("zone", pa.string()),
                pa.field("capacity_type", pa.string()),  # on_demand | spot | reserved
                pa.field("node_pool", pa.string()),
                pa.field("labels", _STR_MAP),
                pa.field("annotations", _STR_MAP),
                pa.field("taints", pa.list_(_TAINT)),
                pa.field("unschedulable", pa.bool_()),
                pa.field("capacity", _QTY_MAP),
                pa.field("allocatable", _QTY_MAP),
                pa.field("gpu_product", pa.string()),
                pa.field("gpu_count", pa.int32()),
                pa.field("gpu_memory_mib", pa.int64()),
                pa.field("gpu_replicas", pa.int32()),  # time-slicing replicas; null or 1 = not shared
                pa.field("mig_config", pa.string()),
                pa.field("mig_strategy", pa.string()),
            ],
            "snapshot_ts",
            ("snapshot_ts", "node"),
            ("snapshot_ts", "node"),
        ),
        _t(
            "k8s_pods",
            [
                pa.field("snapshot_ts", TS),
                pa.field("namespace", pa.string()),
                pa.field("pod", pa.string()),
                pa.field("uid", pa.string()),
                pa.field("node", pa.string()),
                pa.field("phase", pa.string()),
                pa.field("qos_class", pa.string()),
                pa.field("priority", pa.int32()),
                pa.field("priority_class", pa.string()),
                pa.field("owner_kind", pa.string()),
                pa.field("owner_name", pa.string()),
                pa.field("labels", _STR_MAP),
                pa.field("annotations", _STR_MAP),
                pa.field("containers", pa.list_(_CONTAINER)),
                pa.field("init_containers", pa.list_(_CONTAINER)),
                pa.field("start_time", TS),
                # Scheduling constraints, so consolidation plans respect them.
                pa.field("node_selector", _STR_MAP),
                pa.field("tolerations", pa.list_(_TOLERATION)),
            ],
            "snapshot_ts",
            ("snapshot_ts", "namespace", "pod"),
            ("snapshot_ts", "namespace", "pod", "uid"),
        ),
        _t(
            "k8s_namespaces",
            [
                pa.field("snapshot_ts", TS),
                pa.field("namespace", pa.string()),
                pa.field("labels", _STR_MAP),
                pa.field("annotations", _STR_MAP),
            ],
            "snapshot_ts",
            ("snapshot_ts", "namespace"),
            ("snapshot_ts", "namespace"),
        ),
        _t(
            "gpu_samples",
            [
                pa.field("ts", TS),
                pa.field("hostname", pa.string()),
                pa.field("gpu", pa.int32()),
                pa.field("uuid", pa.string()),
                pa.field("model_name", pa.string()),
                pa.field("mig_profile", pa.string()),
                pa.field("mig_instance", pa.int32()),
                pa.field("namespace", pa.string()),
                pa.field("pod", pa.string()),
                pa.field("container", pa.string()),
                pa.field("gr_engine_active", pa.float32()),
                pa.field("gpu_util", pa.float32()),
                pa.field("fb_used_mib", pa.float32()),
                pa.field("fb_free_mib", pa.float32()),
                pa.field("power_w", pa.float32()),
                pa.field("tensor_active", pa.float32()),
            ],
            "ts",
            ("ts", "hostname", "uuid", "mig_instance", "namespace", "pod"),
            ("ts", "hostname", "gpu"),
        ),
        _t(
            "container_usage",
            [
                pa.field("ts", TS),
                pa.field("namespace", pa.string()),
                pa.field("pod", pa.string()),
                pa.field("container", pa.string()),
                pa.field("cpu_cores", pa.float32()),
                pa.field("memory_working_set_bytes", pa.float64()),
            ],
            "ts",
            ("ts", "namespace", "pod", "container"),
            ("ts", "namespace", "pod", "container"),
        ),
        _t(
            "serving_requests",
            [
                # Cumulative request and token counters of model-serving pods (vLLM, or any server
                # through a configured PromQL), one row per series per timestamp; the warehouse turns
                # them into increases (a counter reset handled as Prometheus increase() does).
                pa.field("ts", TS),
                pa.field("namespace", pa.string()),
                pa.field("pod", pa.string()),
                pa.field("model", pa.string()),
                pa.field("requests_total", pa.float64()),
                pa.field("prompt_tokens_total", pa.float64()),
                pa.field("generation_tokens_total", pa.float64()),
            ],
            "ts",
            ("ts", "namespace", "pod", "model"),
            ("ts",),
        ),
        _t(
            "applied_changes",
            [
                # Every change of the app DB that was applied (changes/export.py), one row per change;
                # re-exported whole on every run, so a later rollback or verification lands too.
                pa.field("applied_at", TS),
                pa.field("change_id", pa.string()),
                pa.field("kind", pa.string()),
                pa.field("namespace", pa.string()),  # null for node actions
                pa.field("target_kind", pa.string()),
                pa.field("target_name", pa.string()),
                pa.field("team", pa.string()),
                pa.field("recommendation_id", pa.string()),
                pa.field("status", pa.string()),
                pa.field("verified_at", TS),
                pa.field("ended_at", TS),  # rolled back or failed after it was applied: no longer in effect
                pa.field("est_monthly_savings_usd", pa.float64()),  # the recommendation's estimate
            ],
            "applied_at",
            ("change_id",),
            ("applied_at", "change_id", "kind", "target_kind", "target_name", "status"),
        ),
        _t(
            "prices",
            [
                pa.field("provider", pa.string()),
                pa.field("region", pa.string()),
                pa.field("instance_type", pa.string()),
                pa.field("capacity_type", pa.string()),
                pa.field("usd_per_hour", pa.float64()),
                pa.field("gpu_usd_per_hour", pa.float64()),
                pa.field("currency", pa.string()),
                pa.field("effective_from", TS),
                pa.field("effective_to", TS),
                pa.field("source", pa.string()),
            ],
            "effective_from",
            ("provider", "region", "instance_type", "capacity_type", "effective_from"),
            ("provider", "region", "instance_type", "capacity_type", "usd_per_hour", "effective_from"),
        ),
        _t(
            "billing_focus",
            [
                # FOCUS 1.0-1.3 columns used downstream, typed; the rest of a file's columns are
                # kept verbatim as JSON in ``extra_columns`` so nothing is lost.
                pa.field("BillingPeriodStart", TS),
                pa.field("BillingPeriodEnd", TS),
                pa.field("ChargePeriodStart", TS),
                pa.field("ChargePeriodEnd", TS),
                pa.field("BillingAccountId", pa.string()),
                pa.field("SubAccountId", pa.string()),
                pa.field("ProviderName", pa.string()),
                pa.field("PublisherName", pa.string()),
                pa.field("InvoiceIssuerName", pa.string()),
                pa.field("ServiceName", pa.string()),
                pa.field("ServiceCategory", pa.string()),
                pa.field("ChargeCategory", pa.string()),
                pa.field("ChargeClass", pa.string()),
                pa.field("ChargeDescription", pa.string()),
                pa.field("ChargeFrequency", pa.string()),
                pa.field("PricingCategory", pa.string()),
                pa.field("CommitmentDiscountId", pa.string()),
                pa.field("ResourceId", pa.string()),
                pa.field("ResourceName", pa.string()),
                pa.field("ResourceType", pa.string()),
                pa.field("RegionId", pa.string()),
                pa.field("AvailabilityZone", pa.string()),
                pa.field("SkuId", pa.string()),
                pa.field("SkuPriceId", pa.string()),
                pa.field("ConsumedQuantity", pa.float64()),
                pa.field("ConsumedUnit", pa.string()),
                pa.field("PricingQuantity", pa.float64()),
                pa.field("PricingUnit", pa.string()),
                pa.field("ListCost", pa.float64()),
                pa.field("ContractedCost", pa.float64()),
                pa.field("BilledCost", pa.float64()),
                pa.field("EffectiveCost", pa.float64()),
                pa.field("BillingCurrency", pa.string()),
                pa.field("Tags", _STR_MAP),
                pa.field("focus_version", pa.string()),
                pa.field("extra_columns", pa.string()),
                pa.field("source_file", pa.string()),
                pa.field("file_hash", pa.string()),
                pa.field("row_hash", pa.string()),
            ],
            "ChargePeriodStart",
            ("row_hash",),
            ("ChargePeriodStart", "ChargePeriodEnd", "BilledCost", "EffectiveCost", "ProviderName"),
        ),
    ]
}


def get_table(name: str) -> LandingTable:
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown landing table {name!r}; known: {', '.join(TABLES)}") from None
