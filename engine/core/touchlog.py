"""FleetState's touch logs (a mixin: same state, own idea): which clusters' free capacity or excess may have
changed, in order, so that a reader that looked at the fleet before (a parked search's room, engine.core.searchroom;
an idle queue's shortfall, engine.core.idle; kept placement scores) looks again only at those.

``touched`` names every cluster whose ``free`` or ``excess`` may have changed; ``grown`` only those where either
may have *risen* (all but bookings that only take). Positions are absolute: a reader keeps ``touched_end`` and
later asks ``touched_since`` for what came after, or gets None (look at everything) when the log has started
again since or too much came. A dry run drops what it logged (``Claims.dry_run_end``): it undoes its changes.
"""

from __future__ import annotations

from typing import Optional

_TOUCHED_MAX = 1 << 16
"""``FleetState.touched`` starts again after this many entries (a room that looked before then checks all)."""


class TouchLog:
    touched: list[str]
    touched_base: int
    grown: list[str]
    grown_base: int

    @property
    def touched_end(self) -> int:
        """The absolute position after the last entry of ``touched``: what a reader keeps to ask ``touched_since``."""
        return self.touched_base + len(self.touched)

    def touched_since(self, at: Optional[int], most: int) -> Optional[list[str]]:
        """The clusters touched from absolute position ``at`` on (repeats included), or None when ``at`` is None,
        the log no longer reaches back to it, or more than ``most`` entries came since: the reader then looks at
        every cluster again."""
        return _since(self.touched, self.touched_base, at, most)

    @property
    def grown_end(self) -> int:
        """Like ``touched_end``, for ``grown``."""
        return self.grown_base + len(self.grown)

    def grown_since(self, at: Optional[int], most: int) -> Optional[list[str]]:
        """Like ``touched_since``, for ``grown``."""
        return _since(self.grown, self.grown_base, at, most)

    def _touch(self, cluster: str, grew: bool = True) -> None:
        """``free(cluster)`` or ``excess(cluster)`` may have changed (see ``touched``); ``grew``: unless only
        lowered (every amount of both the same or less), see ``grown``."""
        touched = self.touched
        if len(touched) >= _TOUCHED_MAX:
            self.touched_base += len(touched)
            self.touched = touched = []
        touched.append(cluster)
        if grew:
            grown = self.grown
            if len(grown) >= _TOUCHED_MAX:
                self.grown_base += len(grown)
                self.grown = grown = []
            grown.append(cluster)


def _since(log: list[str], base: int, at: Optional[int], most: int) -> Optional[list[str]]:
    """The entries of ``log`` (its first at absolute position ``base``) from ``at`` on, or None (see
    ``FleetState.touched_since``)."""
    if at is None:
        return None
    end = base + len(log)
    if not base <= at <= end or end - at > most:
        return None
    return log[at - base:]
