"""Which bindings still have Works on which members: the proof that an evicted workload is gone.

Why Works and not the binding's status: Karmada's binding controller deletes a binding's Works once its
``spec.clusters`` is cleared, and a Work disappears only after the execution controller has deleted the member
object (its finalizer ``karmada.io/execution-controller`` holds it until then); ``status.aggregatedStatus``
skips Works that are terminating, so it turns empty while the workload may still run.

Why metadata only: a Work carries the whole manifest; the controller needs only its namespace
(``karmada-es-<cluster>``) and the binding annotations, so Works are listed and watched as
``PartialObjectMetadata`` (a few hundred bytes each), with the same list+watch cache as everything else.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from engine.kube.translate import meta, object_key

WORKS_PATH = "/apis/work.karmada.io/v1alpha1/works"
RB_NAME = "resourcebinding.karmada.io/name"
RB_NAMESPACE = "resourcebinding.karmada.io/namespace"
CRB_NAME = "clusterresourcebinding.karmada.io/name"
EXECUTION_SPACE = "karmada-es-"


def binding_of(work: Mapping[str, Any]) -> Optional[str]:
    """The key (``namespace/name`` or ``name``) of the binding a Work was rendered from, if any."""
    annotations = meta(work).get("annotations") or {}
    labels = meta(work).get("labels") or {}
    for source in (annotations, labels):
        if source.get(RB_NAME):
            ns = source.get(RB_NAMESPACE)
            return f"{ns}/{source[RB_NAME]}" if ns else str(source[RB_NAME])
        if source.get(CRB_NAME):
            return str(source[CRB_NAME])
    return None


def cluster_of(work: Mapping[str, Any]) -> str:
    ns = str(meta(work).get("namespace") or "")
    return ns[len(EXECUTION_SPACE):] if ns.startswith(EXECUTION_SPACE) else ns


class WorkIndex:
    """binding key -> {work key: member cluster}, kept by the Works watch cache."""

    def __init__(self) -> None:
        self.by_binding: dict[str, dict[str, str]] = {}

    def apply(self, new: Optional[Mapping[str, Any]], old: Optional[Mapping[str, Any]]) -> Optional[str]:
        """One watch change; returns the binding whose Works changed (None for unrelated Works)."""
        obj = new or old
        if obj is None:
            return None
        key = binding_of(obj)
        if key is None:
            return None
        works = self.by_binding.setdefault(key, {})
        if new is None:
            works.pop(object_key(obj), None)
            if not works:
                del self.by_binding[key]
        else:
            works[object_key(obj)] = cluster_of(obj)
        return key

    def has_works(self, binding: str) -> bool:
        return bool(self.by_binding.get(binding))

    def clusters(self, binding: str) -> list[str]:
        return sorted(set((self.by_binding.get(binding) or {}).values()))


def metadata_lister(api_client: Any, path: str = WORKS_PATH) -> Any:
    """A list function for ``WatchCache`` that lists and watches ``path`` as PartialObjectMetadata.

    kubernetes-asyncio's generated methods overwrite the Accept header, so this calls ``call_api`` itself;
    it takes the keyword arguments ``WatchCache`` and ``Watch.stream`` pass."""
    names = {"resource_version": "resourceVersion", "allow_watch_bookmarks": "allowWatchBookmarks",
             "timeout_seconds": "timeoutSeconds", "label_selector": "labelSelector"}

    async def list_works(**kwargs: Any) -> Any:
        watch = bool(kwargs.pop("watch", False))
        kwargs.pop("_preload_content", None)
        query: list[tuple[str, Any]] = [("watch", "true")] if watch else []
        for arg, name in names.items():
            if kwargs.get(arg) not in (None, ""):
                value = kwargs[arg]
                query.append((name, str(value).lower() if isinstance(value, bool) else value))
        kind = "PartialObjectMetadata" if watch else "PartialObjectMetadataList"
        headers = {"Accept": f"application/json;as={kind};g=meta.k8s.io;v=v1,application/json"}
        return await api_client.call_api(path, "GET", query_params=query, header_params=headers,
                                         auth_settings=["BearerToken"], _preload_content=False,
                                         response_types_map={200: "object"})

    return list_works
