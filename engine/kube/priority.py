"""A workload's priority: the PriorityClass its template names (or the globalDefault one) and that class's
value, refused as Kubernetes would refuse it."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from engine.errors import InputError
from engine.kube.demand import _pod_spec
from engine.kube.objects import INT32_MAX, INT32_MIN, VOLCANO_JOB, Obj, _items, meta, template_gvk


def priority_class_of(obj: Obj) -> str:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return ""
    if template_gvk(obj) == VOLCANO_JOB:
        if spec.get("priorityClassName"):
            return str(spec["priorityClassName"])
        for t in _items(spec.get("tasks")):
            pod = _pod_spec(t.get("template")) if isinstance(t, Mapping) else None
            if isinstance(pod, Mapping) and pod.get("priorityClassName"):
                return str(pod["priorityClassName"])
        return ""
    pod = _pod_spec(spec.get("template"))
    return str(pod.get("priorityClassName") or "") if isinstance(pod, Mapping) else ""


HIGHEST_USER_PRIORITY = 1_000_000_000
"""Kubernetes' ``HighestUserDefinablePriority``: only ``system-*`` classes may go above it (up to int32)."""


def priority_value_problem(name: str, value: Any) -> Optional[str]:
    """Why a PriorityClass ``value`` is one Kubernetes would refuse (None when it is fine): it is an int32, at most
    1e9 unless the class is a ``system-*`` one. Outside int64 it would crash the policy's CEL later."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer, got {value!r}"
    if not INT32_MIN <= value <= INT32_MAX:
        return f"{value} is outside int32 [{INT32_MIN}, {INT32_MAX}], the range Kubernetes allows"
    if value > HIGHEST_USER_PRIORITY and not name.startswith("system-"):
        return f"{value} is above {HIGHEST_USER_PRIORITY:,}, the highest Kubernetes allows a class not named system-*"
    return None


class PriorityClasses:
    """PriorityClass name -> value, and the globalDefault one, kept from the PriorityClass cache. A class whose
    value Kubernetes would refuse is kept aside (``invalid``): a job naming it is refused naming the class."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}
        self.global_default: Optional[tuple[str, int]] = None
        self.invalid: dict[str, str] = {}
        self.invalid_default: Optional[str] = None

    def rebuild(self, objects: Mapping[str, Obj]) -> None:
        self.values.clear()
        self.invalid.clear()
        self.global_default = None
        self.invalid_default = None
        for obj in objects.values():
            name = str(meta(obj).get("name", ""))
            value = obj.get("value")
            problem = priority_value_problem(name, value)
            if problem is not None:
                self.invalid[name] = problem
                if obj.get("globalDefault"):
                    self.invalid_default = name
                continue
            assert isinstance(value, int)
            self.values[name] = value
            if obj.get("globalDefault"):
                self.global_default = (name, value)

    def resolve(self, class_name: str) -> tuple[str, int]:
        """(class name, value): the named class, else the globalDefault one, else ("", 0). InputError naming the
        PriorityClass when the class that applies has a value Kubernetes would refuse."""
        if not class_name:
            if self.global_default is None and self.invalid_default is not None:
                raise InputError(self.invalid[self.invalid_default], f"PriorityClass {self.invalid_default}: value")
            return self.global_default or ("", 0)
        if class_name in self.invalid:
            raise InputError(self.invalid[class_name], f"PriorityClass {class_name}: value")
        return class_name, self.values.get(class_name, 0)
