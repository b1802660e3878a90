"""Nearest-rank percentiles, shared by the simulator's report and the benchmarks."""

from __future__ import annotations

import math
from typing import Optional


def percentile(values: list[float], q: float) -> Optional[float]:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]
