"""FitIndex: for each resource request seen, the set of clusters where it fits, kept current incrementally.

The engine asks "where does this job's gang minimum fit?" once per placement; checking every
cluster's free vector each time costs O(clusters x resources) even though an admission changes
the free capacity of one or two clusters only. FleetState reports every cluster whose free
capacity may have changed (``changed``); a request's set is brought up to date by re-checking
just the clusters reported since it was last used. A big backlog has a few hundred distinct
request shapes, so the sets are shared by thousands of jobs.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

Request = tuple[tuple[str, int], ...]          # (resource, amount > 0) pairs


class FitIndex:
    def __init__(self, log_limit: int = 4096, request_limit: int = 2048) -> None:
        self._log: list[str] = []                              # clusters whose free capacity changed, in order
        self._sets: dict[Request, tuple[int, set[str]]] = {}   # request -> (log length seen, where it fits)
        self._log_limit = log_limit
        self._request_limit = request_limit

    def changed(self, cluster: str) -> None:
        """``cluster``'s free capacity changed, or it was added or removed."""
        self._log.append(cluster)
        if len(self._log) > self._log_limit:
            self.reset()

    def reset(self) -> None:
        self._log.clear()
        self._sets.clear()

    def fitting(self, request: Request, clusters: Iterable[str], free_of: Callable[[str], Mapping[str, int]],
                exists: Callable[[str], bool]) -> set[str]:
        """Names of the clusters (of ``clusters``, every cluster the state knows) where ``request`` fits
        now. The returned set is the index's own: do not mutate it."""
        entry = self._sets.get(request)
        log = self._log
        if entry is None:
            if len(self._sets) >= self._request_limit:
                self.reset()
            fit = {name for name in clusters if _fits(request, free_of(name))}
        else:
            seen, fit = entry
            if seen == len(log):
                return fit
            for name in set(log[seen:]):
                if exists(name) and _fits(request, free_of(name)):
                    fit.add(name)
                else:
                    fit.discard(name)
        self._sets[request] = (len(log), fit)
        return fit


def _fits(request: Request, free: Mapping[str, int]) -> bool:
    for name, amount in request:
        if amount > free.get(name, 0):
            return False
    return True
