"""FitIndex: for each resource request seen, the set of clusters where it fits, kept current incrementally.

The engine asks "where does this job's gang minimum fit?" once per placement; checking every
cluster's free vector each time costs O(clusters x resources) even though an admission changes
the free capacity of one or two clusters only. FleetState reports every cluster whose free
capacity may have changed (``changed``); a request's set is brought up to date by re-checking
just the clusters reported since it was last used. A big backlog has a few hundred distinct
request shapes, so the sets are shared by thousands of jobs.

A change is marked *shrunk* when the cluster's free capacity (totals and node view) can only have
gone down (an admission booked on it). For a *monotone* request -- one that fits no less when the
cluster has more -- a cluster that did not hold it and has only shrunk since still does not: it is
not tested again. Fitting the totals is monotone, and so is a node-aware test of identical pods
(the sum over nodes of what each holds); first-fit packing of several pod shapes is not (packing
anomalies), so such tests say ``monotone=False``.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Mapping, Optional

Request = Hashable      # (resource, amount > 0) pairs, or any key with its own ``test``


class FitIndex:
    def __init__(self, log_limit: int = 16384, request_limit: int = 2048) -> None:
        self._log: list[str] = []                              # clusters whose free capacity changed, in order
        self._shrunk: list[bool] = []                          # per log entry: that change only took capacity
        self._sets: dict[Request, tuple[int, set[str]]] = {}   # request -> (log length seen, where it fits)
        # request -> (log length seen, how many fit per cluster, the most on a ready cluster, how many ready hold it)
        self._counts: dict[Request, tuple[int, dict[str, int], int, int]] = {}
        self._grown = 0         # log length just after the last change that was not a shrink (see ``below``)
        self._log_limit = log_limit
        self._request_limit = request_limit

    def changed(self, cluster: str, shrunk: bool = False) -> None:
        """``cluster``'s free capacity changed, or it was added or removed. ``shrunk``: it can only have
        gone down, totals and node view alike (see the module docstring)."""
        self._log.append(cluster)
        self._shrunk.append(shrunk)
        if not shrunk:
            self._grown = len(self._log)
        if len(self._log) > self._log_limit:
            self.reset()

    def reset(self) -> None:
        self._grown = 0
        self._log.clear()
        self._shrunk.clear()
        self._sets.clear()
        self._counts.clear()

    def fitting(self, request: Request, clusters: Iterable[str], free_of: Callable[[str], Mapping[str, int]],
                exists: Callable[[str], bool], test: Optional[Callable[[str], bool]] = None,
                monotone: bool = True) -> set[str]:
        """Names of the clusters (of ``clusters``, every cluster the state knows) where ``request`` fits
        now: its pairs fit ``free_of(name)``, or ``test(name)`` when given (node-aware checks, whose
        key must then name everything the test reads; ``monotone``: whether the test can only turn
        false when a cluster shrinks). The returned set is the index's own."""
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
            names = set(log[seen:])
            if monotone:        # a cluster that held it not and only shrank since holds it not
                grew = self._grew(seen)
                names = {name for name in names if name in fit or name in grew}
            for name in names:
                if exists(name) and test(name):
                    fit.add(name)
                else:
                    fit.discard(name)
        self._sets[request] = (len(log), fit)
        return fit

    def counts(self, request: Request, clusters: Iterable[str], count: Callable[[str], int],
               exists: Callable[[str], bool], ready: Callable[[str], bool]) -> tuple[dict[str, int], int]:
        """Per cluster (of ``clusters``, every cluster the state knows), ``count(name)`` now -- how many
        pods of one shape it holds (``FleetState.replicas_fit``) -- and the most on a ready cluster:
        "does a gang of n such pods fit somewhere" is then one comparison, for every n. Kept like
        ``fitting``: only clusters changed since are counted again, except that a count of 0 stays 0
        while the cluster only shrinks; the most is taken again over every cluster only when some change
        was not a shrink or the last ready cluster holding it (its ties are counted) lost some. The returned
        dict is the index's own."""
        entry = self._counts.get(request)
        log = self._log
        if entry is not None and entry[0] == len(log):
            return entry[1], entry[2]
        if entry is None:
            if len(self._counts) >= self._request_limit:
                self.reset()
            got = {name: count(name) for name in clusters}
            most, ties = _most(got, ready)
        else:
            seen, got, most, ties = entry
            grew = self._grew(seen)
            # Only shrunk clusters (engine bookings: readiness and membership unchanged) keep the most, counted
            # with its ties: it is taken again over every cluster only when the last ready cluster holding it lost
            # some; any other change takes it again.
            again = bool(grew)
            for name in set(log[seen:]):
                if not exists(name):
                    got.pop(name, None)
                elif got.get(name, 1) or name in grew:
                    old = got.get(name, 0)
                    new = got[name] = count(name)
                    if not again and new < old == most and ready(name):    # a shrink: new < old <= most
                        ties -= 1
                        again = not ties
            if again:
                most, ties = _most(got, ready)
        self._counts[request] = (len(log), got, most, ties)
        return got, most

    def _grew(self, seen: int) -> set[str]:
        """The clusters logged since ``seen`` with a change that was not a shrink; none, without going through
        the log, when the last such change came before ``seen`` (a cycle's admissions are all shrinks)."""
        if self._grown <= seen:
            return set()
        log, shrunk = self._log, self._shrunk
        return {log[i] for i in range(seen, len(log)) if not shrunk[i]}

    def holds(self, request: Request, count: int) -> Optional[bool]:
        """Whether ``count`` pods fit on one ready cluster (the most there >= ``count``), when known without
        counting again; else None (call ``counts``). Known when nothing changed since ``counts``, and also
        when it gave less than ``count`` and every change since only shrank a cluster (an engine booking: a
        count can only go down; readiness and membership are unchanged): between two reports a cycle's
        admissions only shrink, so a pod shape held nowhere stays so without a recount per admission."""
        entry = self._counts.get(request)
        if entry is None:
            return None
        if entry[0] == len(self._log):
            return entry[2] >= count
        if entry[2] < count and self._grown <= entry[0]:
            return False
        return None


def _most(got: Mapping[str, int], ready: Callable[[str], bool]) -> tuple[int, int]:
    """The most in ``got`` over ready clusters (0 when none), and how many ready clusters hold exactly that."""
    most = ties = 0
    for name, n in got.items():
        if n >= most and ready(name):
            if n > most:
                most, ties = n, 1
            else:
                ties += 1
    return most, ties


def _fits(request: Any, free: Mapping[str, int]) -> bool:
    for name, amount in request:
        if amount > free.get(name, 0):
            return False
    return True
