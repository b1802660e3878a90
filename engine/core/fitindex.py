"""FitIndex: for each resource request seen, the set of clusters where it fits, kept current incrementally.

The engine asks "where does this job's gang minimum fit?" once per placement; checking every
cluster's free vector each time costs O(clusters x resources) even though an admission changes
the free capacity of one or two clusters only. FleetState reports every cluster whose free
capacity may have changed (``changed``); a request's set is brought up to date by re-checking
just the clusters reported since it was last used. A big backlog has a few hundred distinct
request shapes, so the sets are shared by thousands of jobs.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Mapping, Optional

Request = Hashable      # (resource, amount > 0) pairs, or any key with its own ``test``


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
                exists: Callable[[str], bool], test: Optional[Callable[[str], bool]] = None) -> set[str]:
        """Names of the clusters (of ``clusters``, every cluster the state knows) where ``request`` fits
        now: its pairs fit ``free_of(name)``, or ``test(name)`` when given (node-aware checks, whose
        key must then name everything the test reads). The returned set is the index's own."""
        entry = self._sets.get(request)
        log = self._log
        if entry is not None and entry[0] == len(log):
            return entry[1]
        if test is None:
            test = lambda name: _fits(request, free_of(name))     # noqa: E731
        if entry is None:
            if len(self._sets) >= self._request_limit:
                self.reset()
            fit = {name for name in clusters if test(name)}
        else:
            seen, fit = entry
            for name in set(log[seen:]):
                if exists(name) and test(name):
                    fit.add(name)
                else:
                    fit.discard(name)
        self._sets[request] = (len(log), fit)
        return fit


def _fits(request: Any, free: Mapping[str, int]) -> bool:
    for name, amount in request:
        if amount > free.get(name, 0):
            return False
    return True
