"""Kubernetes quantities parse to exact integers; bad ones name the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import InputError
from engine.resources import (add, dominant_share, fits, format_quantity, format_resources, parse_quantity,
                              parse_resources, shortfall, sub)


@pytest.mark.parametrize("value,resource,expected", [
    ("500m", "cpu", 500), ("2", "cpu", 2000), (2, "cpu", 2000), ("1.5", "cpu", 1500), ("0.1", "cpu", 100),
    ("1e3", "cpu", 1_000_000), ("100u", "cpu", 1), ("10Gi", "memory", 10 * 2**30), ("1G", "memory", 10**9),
    ("128974848", "memory", 128974848), ("129e6", "memory", 129_000_000), ("123Mi", "memory", 123 * 2**20),
    ("8", "nvidia.com/gpu", 8), ("1k", "pods", 1000), ("0.5", "memory", 1), ("1Ki", "memory", 1024),
])
def test_parses_kubernetes_quantities_exactly(value: object, resource: str, expected: int) -> None:
    assert parse_quantity(value, resource) == expected


@pytest.mark.parametrize("value", ["", "abc", "1.2.3", "10 Gi", "-1", "1Zi", None, True, [1]])
def test_rejects_bad_quantities_naming_the_field(value: object) -> None:
    with pytest.raises(InputError) as excinfo:
        parse_quantity(value, "memory", "jobs[0].tasks[0].resources.memory")
    assert "jobs[0].tasks[0].resources.memory" in str(excinfo.value)


def test_parse_resources_names_the_bad_entry() -> None:
    with pytest.raises(InputError, match=r"spec.cpu"):
        parse_resources({"cpu": "lots"}, "spec")
    assert parse_resources({"cpu": "0", "memory": "1Gi"}) == {"memory": 2**30}


def test_formatting_round_trips_for_messages() -> None:
    assert format_quantity("cpu", 1500) == "1500m"
    assert format_quantity("cpu", 2000) == "2"
    assert format_quantity("memory", 10 * 2**30) == "10Gi"
    assert format_resources({"memory": 2**31, "cpu": 500}) == "cpu=500m memory=2Gi"


vectors = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.integers(0, 10**12))


@given(vectors, vectors)
def test_fits_agrees_with_shortfall(request: dict[str, int], free: dict[str, int]) -> None:
    assert fits(request, free) == (shortfall(request, free) == {})
    assert sub(add(free, request), request) == {k: v for k, v in free.items() if v}


def test_dominant_share_is_the_largest_ratio() -> None:
    assert dominant_share({"cpu": 50, "memory": 10}, {"cpu": 100, "memory": 100}) == 0.5
    assert dominant_share({"nvidia.com/gpu": 1}, {"cpu": 100}) == 1.0
    assert dominant_share({}, {"cpu": 100}) == 0.0


def test_explicit_zero_limits_survive_only_when_asked() -> None:
    assert parse_resources({"cpu": "4", "nvidia.com/gpu": "0"}) == {"cpu": 4000}
    assert parse_resources({"cpu": "4", "nvidia.com/gpu": "0"}, keep_zero=True) == {"cpu": 4000, "nvidia.com/gpu": 0}


@pytest.mark.parametrize("value,resource", [("1e30", "cpu"), ("1e30", "memory"), ("1e999999999", "memory"),
                                            ("9223372036854775807", "cpu"), ("9Ei", "memory"), (1e30, "cpu"),
                                            (float("inf"), "memory"), (float("nan"), "cpu")])
def test_absurd_quantities_are_input_errors_not_huge_numbers(value: object, resource: str) -> None:
    """Kubernetes reads quantities as int64 (cpu in milli-cores): anything beyond is hostile, and must fail fast
    (no arithmetic on a 10^999999999) with a precise error rather than crash or schedule nothing forever."""
    with pytest.raises(InputError, match=r"larger than Kubernetes allows|invalid quantity") as info:
        parse_quantity(value, resource, "spec.x")
    assert "spec.x" in str(info.value)
    assert parse_quantity("9223372036854775807m", "cpu") == 2**63 - 1


def test_whole_units_follows_kubernetes_milli_value_rule() -> None:
    """Kubernetes refuses a fraction of a resource it counts in units (pods, extended resources) when its value
    in milli-units, rounded up, is not a multiple of 1000 (``MilliValue() % 1000``)."""
    from engine.resources import whole_units

    for value in (2, "2", "2.0", 2.0, "1000m", "1k", "0.5Ki", "0", "1.9999", "9223372036854775807"):
        assert whole_units(value), value
    for value in ("0.5", 0.5, "500m", "1.0001", "1.0000000000000000000000000001", "1e-99999999", "1500m", 1.5):
        assert not whole_units(value), value


def test_quantities_are_parsed_exactly_beyond_28_digits() -> None:
    """Decimal's default context keeps 28 digits and flushes tiny exponents to 0: a quantity is rounded up exactly
    as Kubernetes rounds it, however many digits it has."""
    from engine.resources import parse_quantity

    assert parse_quantity("1.0000000000000000000000000001", "cpu") == 1001
    assert parse_quantity("1.0000000000000000000000000001", "memory") == 2
    assert parse_quantity("1e-99999999", "memory") == 1 and parse_quantity("1e-99999999", "cpu") == 1
    assert parse_quantity("0.000000000000000000000000000000001Ki", "memory") == 1


def test_an_integer_too_long_to_print_is_a_clear_error() -> None:
    """A JSON or YAML integer of 5,000 digits made Decimal() raise ValueError (Python's 4,300-digit limit)."""
    import pytest

    from engine.errors import InputError
    from engine.resources import parse_quantity

    with pytest.raises(InputError, match="quantity of 16610 bits is larger than Kubernetes allows"):
        parse_quantity(10**5000, "cpu", "w")
    with pytest.raises(InputError, match="larger than Kubernetes allows"):
        parse_quantity(2**256, "memory", "w")
