"""The types a policy's CEL sees, and the functions the CEL runtime (cel-python) really has.

``engine.policy.cel_check`` walks an expression's syntax tree with these: every field path is checked
against the typed objects of ``engine.policy.cel_vars``, every function and method against
``FUNCTIONS``/``METHODS`` (each of which ``tests/test_cel_check.py`` calls on the real runtime), and
every operator against CEL's overloads (CEL never converts between int, uint and double).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Union


@dataclass(frozen=True)
class Prim:
    """int, uint, double, string, bool, bytes, null, type, timestamp, duration, or dyn (unknown)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ListT:
    elem: "CelType"

    def __str__(self) -> str:
        return f"list({self.elem})"


@dataclass(frozen=True)
class MapT:
    key: "CelType"
    value: "CelType"

    def __str__(self) -> str:
        return f"map({self.key}, {self.value})"


@dataclass(frozen=True)
class ObjT:
    """A documented object (job, queue, cluster, a task): a map whose keys are known fields."""

    name: str
    fields: Mapping[str, "CelType"] = field(hash=False, compare=False)

    def __str__(self) -> str:
        return self.name


CelType = Union[Prim, ListT, MapT, ObjT]

INT, UINT, DOUBLE, STRING, BOOL, BYTES = (Prim(n) for n in ("int", "uint", "double", "string", "bool", "bytes"))
NULL, TYPE, TIMESTAMP, DURATION, DYN = (Prim(n) for n in ("null", "type", "timestamp", "duration", "dyn"))
NUMBERS = (INT, UINT, DOUBLE)
ORDERED = (INT, UINT, DOUBLE, STRING, BYTES, BOOL, TIMESTAMP, DURATION)

# Names that evaluate to a type (``type(x) == int``).
TYPE_NAMES = {"int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type"}


def is_dyn(t: CelType) -> bool:
    return t == DYN


def compatible(a: CelType, b: CelType) -> bool:
    """Could a value of ``a`` equal one of ``b`` at run time without a "no such overload" error?"""
    if is_dyn(a) or is_dyn(b):
        return True
    if isinstance(a, ObjT) or isinstance(b, ObjT):      # documented objects are string-keyed maps
        a = MapT(STRING, DYN) if isinstance(a, ObjT) else a
        b = MapT(STRING, DYN) if isinstance(b, ObjT) else b
    if isinstance(a, ListT) and isinstance(b, ListT):
        return compatible(a.elem, b.elem)
    if isinstance(a, MapT) and isinstance(b, MapT):
        return compatible(a.key, b.key) and compatible(a.value, b.value)
    return a == b


def join(a: CelType, b: CelType) -> CelType:
    """The type of a value that is either ``a`` or ``b`` (a ternary's branches, a list's elements)."""
    if a == b:
        return a
    if a == NULL:
        return b
    if b == NULL:
        return a
    if isinstance(a, ListT) and isinstance(b, ListT):
        return ListT(join(a.elem, b.elem))
    if isinstance(a, MapT) and isinstance(b, MapT):
        return MapT(join(a.key, b.key), join(a.value, b.value))
    return DYN


# -- what the runtime has ------------------------------------------------------------------------------
Signature = Callable[[list[CelType]], Optional[CelType]]
"""Argument types -> result type, or None when no overload takes them (dyn arguments always fit)."""


def _fixed(params: tuple[tuple[CelType, ...], ...], result: CelType) -> Signature:
    """Each argument must be one of the listed types (or dyn)."""
    def check(args: list[CelType]) -> Optional[CelType]:
        if len(args) != len(params):
            return None
        for arg, allowed in zip(args, params):
            if not is_dyn(arg) and arg not in allowed:
                return None
        return result
    return check


def _size(args: list[CelType]) -> Optional[CelType]:
    if len(args) == 1 and (is_dyn(args[0]) or args[0] in (STRING, BYTES)
                           or isinstance(args[0], (ListT, MapT, ObjT))):
        return INT
    return None


def _any_one(result: CelType) -> Signature:
    return lambda args: result if len(args) == 1 else None


_CONVERTIBLE = (INT, UINT, DOUBLE, STRING, TIMESTAMP, DURATION, BOOL, BYTES)
_TZ = (STRING,)

# Global functions: ``size(x)``, ``int(x)``... (``has`` and ``dyn`` are macros, handled by the checker).
FUNCTIONS: dict[str, Signature] = {
    "size": _size,
    "int": _fixed(((INT, UINT, DOUBLE, STRING, TIMESTAMP),), INT),
    "uint": _fixed(((INT, UINT, DOUBLE, STRING),), UINT),
    "double": _fixed(((INT, UINT, DOUBLE, STRING),), DOUBLE),
    "string": _fixed((_CONVERTIBLE,), STRING),
    "bool": _fixed(((BOOL, STRING),), BOOL),
    "bytes": _fixed(((BYTES, STRING),), BYTES),
    "type": _any_one(TYPE),
    "duration": _fixed(((STRING, DURATION),), DURATION),
    "timestamp": _fixed(((STRING, TIMESTAMP),), TIMESTAMP),
    "contains": _fixed(((STRING,), (STRING,)), BOOL),
    "startsWith": _fixed(((STRING,), (STRING,)), BOOL),
    "endsWith": _fixed(((STRING,), (STRING,)), BOOL),
}

_TIME_PARTS = ("getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getHours",
               "getMilliseconds", "getMinutes", "getMonth", "getSeconds")


def _time_part(durations_too: bool) -> Signature:
    def check(args: list[CelType]) -> Optional[CelType]:
        receiver, rest = args[0], args[1:]
        if is_dyn(receiver) or (receiver == TIMESTAMP and len(rest) <= 1 and all(a in (STRING, DYN) for a in rest)):
            return INT
        if durations_too and receiver == DURATION and not rest:
            return INT
        return None
    return check


_DURATION_PARTS = ("getHours", "getMilliseconds", "getMinutes", "getSeconds")

# Methods ``receiver.name(args)``: called with [receiver type, *argument types].
METHODS: dict[str, Signature] = {
    "contains": _fixed(((STRING,), (STRING,)), BOOL),
    "startsWith": _fixed(((STRING,), (STRING,)), BOOL),
    "endsWith": _fixed(((STRING,), (STRING,)), BOOL),
    "size": _size,
    **{name: _time_part(name in _DURATION_PARTS) for name in _TIME_PARTS},
}

# Comprehension macros ``list.all(x, predicate)`` ...: the checker types them.
MACROS = ("all", "exists", "exists_one", "map", "filter")

# What the runtime has but a policy may not use, and why (named in the error).
REFUSED = {
    "matches": "regular expressions can backtrack for minutes on a crafted label (no time limit inside the "
               "regex engine); use startsWith, endsWith or contains",
    "reduce": "not a standard CEL macro",
    "min": "not a standard CEL macro",
}
