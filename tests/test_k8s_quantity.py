"""Kubernetes resource.Quantity parsing (ingest/quantity.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufinops.errors import InputError
from ingest.quantity import parse_quantity, parse_quantity_map


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", 0.5),
        ("100m", 0.1),
        ("95690m", 95.69),
        ("16Gi", 17179869184.0),
        ("1Ki", 1024.0),
        ("1176937920Ki", 1176937920 * 1024.0),
        ("2Ei", 2.0 * 2**60),
        ("1e3", 1000.0),
        ("1E3", 1000.0),
        ("1e-3", 0.001),
        ("1.5k", 1500.0),
        ("100M", 1e8),
        ("1E", 1e18),  # bare E is the exa suffix, not an exponent
        ("3T", 3e12),
        ("250n", 2.5e-7),
        ("10u", 1e-5),
        ("0", 0.0),
        ("+3", 3.0),
        ("-2", -2.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("8", 8.0),
        ("0.5Gi", 536870912.0),
    ],
)
def test_quantity_strings(text: str, expected: float) -> None:
    assert parse_quantity(text) == pytest.approx(expected, rel=1e-12)


def test_numbers_pass_through_but_booleans_do_not() -> None:
    assert parse_quantity(4) == 4.0
    assert parse_quantity(0.25) == 0.25
    with pytest.raises(InputError):
        parse_quantity(True)


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "1Gb", "1 Gi", "Gi", "1e", "1ee3", "0x10", "1KiB", "m", "--1", "1e999"])
def test_invalid_quantities_name_the_value(bad: str) -> None:
    with pytest.raises(InputError) as err:
        parse_quantity(bad, where="Pod a/b containers requests[memory]")
    assert repr(bad) in str(err.value)
    assert "Pod a/b" in str(err.value)


def test_non_finite_and_non_string_rejected() -> None:
    for bad in (math.nan, math.inf, None, ["1"]):
        with pytest.raises(InputError):
            parse_quantity(bad)  # type: ignore[arg-type]


def test_map_keeps_resource_names_verbatim() -> None:
    parsed = parse_quantity_map(
        {"cpu": "250m", "memory": "1Gi", "nvidia.com/mig-1g.10gb": "1", "amd.com/gpu": 2}, where="x"
    )
    assert parsed == {"cpu": 0.25, "memory": 2.0**30, "nvidia.com/mig-1g.10gb": 1.0, "amd.com/gpu": 2.0}
    assert parse_quantity_map(None) == {}
    with pytest.raises(InputError, match=r"\[memory\]"):
        parse_quantity_map({"memory": "lots"}, where="Pod a/b")


_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5}
_DECIMAL = {"m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}


@given(n=st.integers(min_value=0, max_value=10**6), suffix=st.sampled_from(sorted(_BINARY)))
def test_binary_suffixes_are_powers_of_1024(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == float(n * 1024 ** _BINARY[suffix])


@given(n=st.integers(min_value=0, max_value=10**6), suffix=st.sampled_from(sorted(_DECIMAL)))
def test_decimal_suffix_equals_exponent_form(n: int, suffix: str) -> None:
    # "<n><suffix>" and "<n>e<power>" are two spellings of the same quantity.
    assert parse_quantity(f"{n}{suffix}") == pytest.approx(parse_quantity(f"{n}e{_DECIMAL[suffix]}"), rel=1e-15)
