"""Kubernetes ``resource.Quantity`` strings to canonical floats: the one place that parses them.

A quantity is a signed decimal number with an optional suffix (k8s.io/apimachinery
``pkg/api/resource/quantity.go``)::

    <quantity> ::= <signedNumber><suffix>
    <suffix>   ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI> ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

The result is in the resource's base unit, which is what the landing tables store: CPU in cores
(``500m`` -> 0.5), memory and storage in bytes (``16Gi`` -> 17179869184.0), everything else as a
count. The arithmetic is done in :class:`~decimal.Decimal` so that ``100m`` or ``1.5k`` are exact
before the single rounding to float.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from gpufinops.errors import InputError

__all__ = ["parse_quantity", "parse_quantity_map"]

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# The exponent alternative comes before the decimal suffixes so that "1e3" is 1000, while a bare
# trailing "E" (no digits after it) still means exa.
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?\d+)|(?P<dec>[numkMGTPE]))?$"
)
_CACHE_MAX = 4096
_cache: dict[str, float] = {}


def parse_quantity(value: str | int | float, *, where: str = "") -> float:
    """Parse one quantity; raise :class:`InputError` naming the value (and ``where``) if invalid.

    Numbers (as found in hand-written JSON/YAML) are accepted as they are; booleans are not.
    """
    if isinstance(value, bool):
        raise InputError(_message(value, where))
    if isinstance(value, int | float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(_message(value, where))
        return float(value)
    if not isinstance(value, str):
        raise InputError(_message(value, where))
    hit = _cache.get(value)
    if hit is not None:
        return hit
    result = _parse(value.strip(), value, where)
    # Clusters repeat a few hundred distinct strings ("1", "500m", "16Gi") millions of times.
    if len(_cache) < _CACHE_MAX:
        _cache[value] = result
    return result


def parse_quantity_map(values: dict[str, object] | None, *, where: str = "") -> dict[str, float]:
    """Parse a ``{resource name: quantity}`` map, keeping every resource name verbatim."""
    if not values:
        return {}
    if not isinstance(values, dict):
        raise InputError(f"{where + ': ' if where else ''}expected a map of resource quantities, got {values!r}")
    out: dict[str, float] = {}
    for name, q in values.items():
        # The cache lookup first: building the error context for every value costs more than parsing.
        hit = _cache.get(q) if isinstance(q, str) else None
        out[str(name)] = hit if hit is not None else parse_quantity(q, where=f"{where}[{name}]" if where else str(name))  # type: ignore[arg-type]
    return out


def _parse(text: str, original: str, where: str) -> float:
    m = _QUANTITY.match(text)
    if m is None:
        raise InputError(_message(original, where))
    try:
        number = Decimal(m["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex only admits valid decimals
        raise InputError(_message(original, where)) from exc
    if m["bin"]:
        return float(number * (Decimal(1024) ** _BINARY[m["bin"]]))
    if m["exp"] is not None:
        exponent = int(m["exp"])
        # Kubernetes caps quantities far below this; a huge exponent is a typo, not a value.
        if abs(exponent) > 300:
            raise InputError(_message(original, where))
        return float(number.scaleb(exponent))
    return float(number.scaleb(_DECIMAL[m["dec"] or ""]))


def _message(value: object, where: str) -> str:
    prefix = f"{where}: " if where else ""
    return (
        f"{prefix}invalid Kubernetes quantity {value!r} "
        "(expected a number with an optional suffix such as 500m, 16Gi, 1.5k or 1e3)"
    )
