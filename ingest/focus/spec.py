"""What a FOCUS bill must contain, per version (1.0-1.3), and how to tell the version from columns.

Mandatory columns follow the FinOps Foundation's FOCUS specification ("Feature level: Mandatory").
1.3 renames ``ProviderName`` to ``ServiceProviderName`` and deprecates ``PublisherName`` (both
become optional there; ``ProviderName`` is still accepted in place of the new name). A file that
names a version explicitly (``--focus-version``) is checked against that version.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpufinops.errors import InputError

__all__ = [
    "VERSIONS",
    "MANDATORY",
    "TIME_COLUMNS",
    "FLOAT_COLUMNS",
    "MAP_COLUMNS",
    "detect_version",
    "missing_mandatory",
    "provider_column",
]

VERSIONS = ("1.0", "1.1", "1.2", "1.3")

_CORE = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
    "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost",
    "PricingQuantity", "PricingUnit", "ServiceCategory", "ServiceName",
)
MANDATORY: dict[str, tuple[str, ...]] = {
    "1.0": _CORE + ("ProviderName", "PublisherName"),
    "1.1": _CORE + ("ProviderName", "PublisherName"),
    "1.2": _CORE + ("ProviderName", "PublisherName"),
    "1.3": _CORE + ("ServiceProviderName",),
}

# Columns that first appear in a version: the newest version whose marker is present wins.
_MARKERS: dict[str, tuple[str, ...]] = {
    "1.3": ("ServiceProviderName", "HostProviderName", "ContractApplied", "AllocatedMethodId", "AllocatedResourceId"),
    "1.2": ("InvoiceId", "PricingCurrency", "PricingCurrencyContractedUnitPrice", "PricingCurrencyEffectiveCost",
            "PricingCurrencyListUnitPrice", "BillingAccountType", "SubAccountType"),
    "1.1": ("CapacityReservationId", "CapacityReservationStatus", "CommitmentDiscountQuantity",
            "CommitmentDiscountUnit", "ServiceSubcategory", "SkuMeter", "SkuPriceDetails"),
}

TIME_COLUMNS = ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd")
FLOAT_COLUMNS = ("ConsumedQuantity", "PricingQuantity", "ListCost", "ContractedCost", "BilledCost", "EffectiveCost")
MAP_COLUMNS = ("Tags",)


def detect_version(columns: Iterable[str], *, declared: str | None = None, where: str = "") -> str:
    """The declared version when given (checked), else the newest whose marker columns are present."""
    if declared is not None:
        version = declared.strip().lstrip("v")
        if version not in VERSIONS:
            raise InputError(f"{where}: FOCUS version {declared!r} is not one of {list(VERSIONS)}")
        return version
    names = set(columns)
    for version in ("1.3", "1.2", "1.1"):
        if names.intersection(_MARKERS[version]):
            return version
    return "1.0"


def provider_column(columns: Iterable[str], version: str) -> str | None:
    """The column that holds the provider: ``ServiceProviderName`` from 1.3 on, else ``ProviderName``."""
    names = set(columns)
    order = ("ServiceProviderName", "ProviderName") if version == "1.3" else ("ProviderName", "ServiceProviderName")
    return next((c for c in order if c in names), None)


def missing_mandatory(columns: Iterable[str], version: str) -> list[str]:
    names = set(columns)
    missing = [c for c in MANDATORY[version] if c not in names]
    if version == "1.3" and "ServiceProviderName" in missing and "ProviderName" in names:
        missing.remove("ServiceProviderName")  # a 1.3 file that kept the old name
    return missing
