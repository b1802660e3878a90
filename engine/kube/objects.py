"""Reading Kubernetes objects (plain dicts as the API returns them): metadata, names for messages, list fields,
int32 counts, the workload kinds Atoll reads. Shared by the translations (engine/kube/translate.py and the
modules it re-exports) and the controller's other readers."""

from __future__ import annotations

from typing import Any, Mapping

from engine.errors import InputError, shown

Obj = Mapping[str, Any]
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1        # Kubernetes' and Volcano's counts and priorities are int32

VOLCANO_JOB = "batch.volcano.sh/v1alpha1/Job"
BATCH_JOB = "batch/v1/Job"
DEPLOYMENT = "apps/v1/Deployment"


def meta(obj: Obj) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def object_key(obj: Obj) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    m = meta(obj)
    ns = m.get("namespace")
    return f"{ns}/{m.get('name', '')}" if ns else str(m.get("name", ""))


def describe(obj: Obj) -> str:
    """``Kind ns/name`` for messages."""
    return f"{obj.get('kind', 'object')} {object_key(obj)}"


def _labels(obj: Obj, field: str = "labels") -> dict[str, str]:
    raw = meta(obj).get(field)
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def _items(value: Any) -> list[Any]:
    """A list field of an object (None and absent: []; any other type: [] too, for status written by other
    controllers; spec fields check the type themselves). ``value or ()`` iterated a number: TypeError."""
    return value if isinstance(value, list) else []


def _int(value: Any, where: str, default: int) -> int:
    """A count of the Kubernetes or Volcano API (replicas, minAvailable, parallelism, weight): an int32, 0 or more."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32_MAX:
        raise InputError(f"expected an integer from 0 to {INT32_MAX} (int32), got {shown(value)}", where)
    return value


def _signed_int(value: Any, where: str) -> int:
    """An int32 of the API (a Volcano Queue's priority): beyond it, the policy's CEL conversion would overflow."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not INT32_MIN <= value <= INT32_MAX:
        raise InputError(f"expected an integer from {INT32_MIN} to {INT32_MAX} (int32), got {shown(value)}", where)
    return value


def template_gvk(obj: Obj) -> str:
    return f"{obj.get('apiVersion', '')}/{obj.get('kind', '')}"
