"""argparse ``type``s shared by the verbs: a bad number on the command line is a usage error (exit 2) naming the
flag, never a traceback later and never a silently different value."""

from __future__ import annotations

import argparse
from typing import Callable, Optional


def count(low: int, high: Optional[int] = None) -> Callable[[str], int]:
    """An integer from ``low`` to ``high`` (inclusive), else a usage error (exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:,}, got {value:,}")
        return value
    parse.__name__ = "integer"           # argparse names the type in its "invalid ... value" fallback
    return parse


def port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535. Outside it, asyncio's bind() raised OverflowError (a traceback) and
    aiohttp's web.TCPSite listened on the port modulo 65536 (``--port 70000`` served on 4464)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, got {value}")
    return value


def positive(text: str) -> float:
    """A finite number above 0 (a rate, an interval): 0 divided by it or made a busy loop; NaN compared false."""
    return _number(text, zero=False)


def non_negative(text: str) -> float:
    """A finite number of 0 or more (0 usually turns the feature off)."""
    return _number(text, zero=True)


def _number(text: str, zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value >= 0 if zero else value > 0) or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number {'of 0 or more' if zero else 'above 0'}, "
                                         f"got {text}")
    return value
