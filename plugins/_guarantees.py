"""Bookkeeping of unused queue guarantees for the capacity plugin (not a plugin module).

A queue's *unused guarantee* is ``max(0, guarantee - allocated)`` per resource. In a
hierarchy a parent's guarantee covers its children, so the capacity held back for a
subtree X is ``R(X) = max(unused(X), sum of R(child))`` (per resource). A queue Q may use
the reservations of its own line (itself, its descendants, its ancestors' slack) but not
anyone else's, so what is protected *from* Q is::

    sum of R(root) over roots other than Q's root
    + for each ancestor A of Q: sum of R(children of A) - R(the child on Q's line)

Only queues with a guarantee and their ancestors carry an R; everything is rebuilt when
the capacity epoch, the number of jobs or of queues changes (releases, edits, arrivals,
adoptions) and otherwise refreshed along one queue's line after it may have admitted a
job: O(depth x resources) per admission check.
"""

from __future__ import annotations

from typing import Hashable, Optional

from engine.core.state import FleetState
from engine.resources import Resources, add_into

_ROOT = ""


def unused(guarantee: Resources, allocated: Resources) -> Resources:
    return {r: g - allocated.get(r, 0) for r, g in guarantee.items() if g > allocated.get(r, 0)}


def vmax(a: Resources, b: Resources) -> Resources:
    out = dict(a)
    for r, v in b.items():
        if v > out.get(r, 0):
            out[r] = v
    return out


class GuaranteeLedger:
    def __init__(self) -> None:
        self._key: Optional[Hashable] = None
        self.reserved: dict[str, Resources] = {}     # R(X) for queues with a guarantee in their subtree
        self.childsum: dict[str, Resources] = {}     # parent ('' = roots) -> sum of R(children)
        self._dirty: Optional[str] = None

    def sync(self, state: FleetState) -> None:
        key = (id(state), state.capacity_epoch, len(state.jobs), len(state.queues))
        if key != self._key:
            self._key = key
            self._dirty = None
            self._rebuild(state)
        elif self._dirty is not None:
            name, self._dirty = self._dirty, None
            if self.reserved:
                self._refresh_line(name, state)

    def touch(self, queue: str) -> None:
        """``queue`` may be charged before the next ``sync`` (its job passed the admit check)."""
        self._dirty = queue

    @property
    def active(self) -> bool:
        return bool(self.reserved)

    def _parent(self, name: str, state: FleetState) -> str:
        parent = state.queues[name].parent
        return parent if parent and parent in state.queues else _ROOT

    def _rebuild(self, state: FleetState) -> None:
        self.reserved = {}
        self.childsum = {}
        carriers: dict[str, int] = {}           # queue -> depth, for queues with a guarantee and their ancestors
        for q in state.queues.values():
            if q.guarantee and any(q.guarantee.values()):
                line = state.ancestors(q.name)
                carriers[q.name] = len(line)
                for depth, parent in enumerate(reversed(line)):
                    carriers.setdefault(parent.name, depth)
        for name in sorted(carriers, key=lambda n: -carriers[n]):      # deepest first: children before parents
            q = state.queues[name]
            value = vmax(unused(q.guarantee, q.allocated), self.childsum.get(name, {}))
            self.reserved[name] = value
            add_into(self.childsum.setdefault(self._parent(name, state), {}), value)

    def _refresh_line(self, name: str, state: FleetState) -> None:
        line = [state.queues[name], *state.ancestors(name)] if name in state.queues else []
        for q in line:
            old = self.reserved.get(q.name)
            if old is None:
                continue
            new = vmax(unused(q.guarantee, q.allocated), self.childsum.get(q.name, {}))
            if new != old:
                self.reserved[q.name] = new
                total = self.childsum.setdefault(self._parent(q.name, state), {})
                add_into(total, new)
                add_into(total, old, -1)

    def protected_from(self, name: str, state: FleetState) -> Resources:
        """Capacity kept for other queues' unused guarantees, which ``name`` must leave free."""
        out = dict(self.childsum.get(_ROOT, {}))
        child = name
        for parent in state.ancestors(name):
            below = self.childsum.get(parent.name)
            if below:
                add_into(out, below)
                own = self.reserved.get(child)
                if own:
                    add_into(out, own, -1)
            child = parent.name
        own_root = self.reserved.get(child)
        if own_root:
            add_into(out, own_root, -1)
        return out
