"""Grouping refusal reasons: the same refusal with other amounts is one kind of reason.

Reasons are user text ("job requests cpu 16, more than the fleet has free"); counting them verbatim gives a
long tail of ones. The simulator's report and the dashboard count by kind, amounts replaced by N.
"""

from __future__ import annotations

import re
from functools import lru_cache

_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[a-zA-Z]+)?\b")


@lru_cache(maxsize=4096)           # reasons repeat: thousands of jobs share a handful
def reason_kind(reason: str) -> str:
    """A reason with its amounts replaced by N, so refusals that differ only in numbers count together
    ("needs 4 cpu, 2 free" and "needs 8 cpu, 3 free"); names such as member1 are kept."""
    return _NUMBER.sub("N", reason)
