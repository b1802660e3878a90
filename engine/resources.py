"""Exact integer resource arithmetic.

Capacity is never a float: cpu is counted in milli-cores, everything else (memory,
pods, ``nvidia.com/gpu``, any extended resource) in whole base units, rounded up
the way the Kubernetes scheduler rounds requests. A resource vector is a plain
``dict[str, int]``; a name absent from a vector means zero.
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_CEILING, Context, Decimal
from functools import lru_cache
from typing import Mapping, Optional

from engine.errors import InputError

Resources = dict[str, int]
"""A resource vector: resource name -> exact integer amount (cpu in milli-cores)."""

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}
MAX_AMOUNT = 2**63 - 1       # Kubernetes reads quantities as int64 (cpu: milli-cores); more is not a real request
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
"""Decimal arithmetic without rounding: quantities are only multiplied (by a suffix, by 1000) and made integral,
and the default 28 digits would round ``1.0000000000000000000000000001`` and flush ``1e-99999999`` to 0."""
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def parse_quantity(value: object, resource: str = "", where: str = "") -> int:
    """Parse a Kubernetes quantity (``500m``, ``10Gi``, ``1e3``, ``2``) into an exact int.

    cpu comes back in milli-cores; every other resource in base units, rounded up.
    Raises InputError naming ``where`` for anything Kubernetes would reject.
    """
    number = _number(value, where)
    if resource == CPU:
        number = _EXACT.multiply(number, 1000)
    if number.is_nan() or number.is_infinite() or number.adjusted() > _MAX_DIGITS:
        raise InputError(f"quantity {value!r} is larger than Kubernetes allows (2^63-1 base units)", where)
    amount = int(number.to_integral_value(rounding=ROUND_CEILING, context=_EXACT))
    if amount > MAX_AMOUNT:
        raise InputError(f"quantity {value!r} is larger than Kubernetes allows (2^63-1 base units)", where)
    return amount


def whole_units(value: object) -> bool:
    """Whether a quantity ``parse_quantity`` accepts is a whole number of units as Kubernetes checks it for the
    resources it counts in units (``pods``, extended resources such as ``nvidia.com/gpu``): its value in
    milli-units, rounded up, is a multiple of 1000 (``0.5`` and ``1.0001`` are not; ``1000m`` and ``0.5Ki`` are;
    ``1.9999`` is, as Kubernetes' ``MilliValue`` rounds it up to 2)."""
    number = _number(value, "")
    if number.adjusted() > _MAX_DIGITS:
        return True                         # more than parse_quantity accepts: an integer (and not ours to judge)
    milli = _EXACT.multiply(number, 1000).to_integral_value(rounding=ROUND_CEILING, context=_EXACT)
    return _EXACT.remainder(milli, Decimal(1000)) == 0


DIVISIBLE = ("cpu", "memory", "ephemeral-storage")
"""With ``hugepages-*``, the resources Kubernetes allows fractions of; every other one (``pods``, extended resources
such as ``nvidia.com/gpu``) is counted in whole units (``IsIntegerResourceName``)."""


def fraction_refused(name: str, value: object) -> Optional[str]:
    """Why Kubernetes refuses ``value`` (a quantity ``parse_quantity`` accepts) for resource ``name``: a fraction of
    a resource counted in whole units (``nvidia.com/gpu: 0.5``); None when it does not."""
    if name in DIVISIBLE or name.startswith("hugepages-") or whole_units(value):
        return None
    return (f"{name} {value!r} is not a whole number (Kubernetes allows fractions only of cpu, memory, "
            f"ephemeral-storage and hugepages-*)")


def _number(value: object, where: str) -> Decimal:
    """A quantity's exact value in base units, finite and not negative."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"quantity must be a number or a string like '500m' or '2Gi', got {value!r}", where)
    if isinstance(value, int):
        if value.bit_length() > 256:    # far beyond int64 (and past 4,300 digits Decimal(value) raises ValueError)
            raise InputError(f"quantity of {value.bit_length()} bits is larger than Kubernetes allows "
                             f"(2^63-1 base units)", where)
        number = Decimal(value)
    elif isinstance(value, float):
        number = Decimal(repr(value))
    elif isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if not match:
            raise InputError(f"invalid quantity {value!r} (expected e.g. '500m', '2', '10Gi', '1e3')", where)
        mantissa, suffix = match.group(1), match.group(2) or ""
        try:
            number = _EXACT.multiply(Decimal(mantissa), _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])
        except ArithmeticError:             # InvalidOperation, or Overflow of an exponent like 1e999999999
            raise InputError(f"invalid quantity {value!r}", where) from None
    else:
        raise InputError(f"quantity must be a number or a string, got {type(value).__name__}", where)
    if not number.is_finite():
        raise InputError(f"invalid quantity {value!r}", where)
    if number < 0:
        raise InputError(f"quantity {value!r} is negative", where)
    return number


_MAX_DIGITS = 19           # checked before the exact int is built: 1e99999 would cost time and memory


def parse_resources(mapping: object, where: str = "", keep_zero: bool = False) -> Resources:
    """Parse ``{cpu: "2", memory: 2Gi}`` into a resource vector, naming the bad field.

    ``keep_zero`` is for limits (a queue's capability): there an explicit ``nvidia.com/gpu: 0``
    means "none", while an absent resource means "unlimited", so the zero must survive."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise InputError(f"expected a mapping of resource name to quantity, got {type(mapping).__name__}", where)
    out: Resources = {}
    for name, raw in mapping.items():
        field = f"{where}.{name}" if where else str(name)
        amount = parse_quantity(raw, str(name), field)
        if amount or keep_zero:
            out[str(name)] = amount
    return out


def format_quantity(resource: str, amount: int) -> str:
    """Human form of an exact amount: ``cpu 1500`` -> ``1.5``, memory in Gi/Mi when exact."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource == MEMORY or amount >= 2**20:
        for suffix in ("Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if amount >= unit and amount % unit == 0:
                return f"{amount // unit}{suffix}"
    return str(amount)


def format_resources(vector: Mapping[str, int]) -> str:
    """``cpu=2 memory=4Gi`` — stable order for messages and logs. Memoised: refusal reasons format
    the same few vectors (a job shape, the fleet's most free) for thousands of pending jobs."""
    return _format_items(tuple(sorted(vector.items())))


@lru_cache(maxsize=4096)
def _format_items(items: tuple[tuple[str, int], ...]) -> str:
    return " ".join(f"{name}={format_quantity(name, amount)}" for name, amount in items) or "nothing"


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = {name: amount for name, amount in a.items() if amount}
    add_into(out, b)
    return out


def add_into(target: Resources, b: Mapping[str, int], sign: int = 1) -> None:
    """In-place ``target += sign * b``; zeros are dropped so vectors stay small."""
    for name, amount in b.items():
        value = target.get(name, 0) + sign * amount
        if value:
            target[name] = value
        else:
            target.pop(name, None)


def sub(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = {name: amount for name, amount in a.items() if amount}
    add_into(out, b, -1)
    return out


def scale(a: Mapping[str, int], factor: int) -> Resources:
    return {name: amount * factor for name, amount in a.items() if amount and factor}


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """True when every requested amount is available (absent from ``free`` = zero)."""
    for name, amount in request.items():
        if amount > free.get(name, 0):
            return False
    return True


def shortfall(request: Mapping[str, int], free: Mapping[str, int]) -> Resources:
    """What is missing for ``request`` to fit in ``free`` (empty when it fits)."""
    return {n: a - free.get(n, 0) for n, a in request.items() if a > free.get(n, 0)}


def clamp_nonnegative(a: Mapping[str, int]) -> Resources:
    return {name: amount for name, amount in a.items() if amount > 0}


def dominant_share(allocated: Mapping[str, int], total: Mapping[str, int]) -> float:
    """max over resources of allocated / total (DRF). A resource with no total counts
    as fully used if anything is allocated; the ratio is for ordering only, never capacity."""
    best = 0.0
    for name, amount in allocated.items():
        if amount <= 0:
            continue
        cap = total.get(name, 0)
        share = amount / cap if cap > 0 else 1.0
        if share > best:
            best = share
    return best
