"""The run-time half of the CEL evaluation budget: an evaluation gets ``EVAL_CPU_BUDGET`` seconds of CPU.

The static half (``engine.policy.cel_size``: text size, syntax nodes and depth; ``engine.policy.cel_check``: at
most two nested comprehensions, no regular expressions) bounds what an expression can do per element of the objects it
reads; an object with thousands of tasks or labels can still make one evaluation slow. So each evaluation
runs under a CPU-time timer (``setitimer(ITIMER_VIRTUAL)``): when it fires, ``BudgetExceeded`` (a
``BaseException``, so cel-python's ``||`` and ``has()`` cannot absorb it) interrupts the evaluation and the
caller reports it like any other run-time error of the expression. The garbage collector is paused for
the evaluation (a full collection of a big heap would otherwise be billed to the expression). CPU time, not wall time, so a busy
machine does not make a good expression fail. Signals only reach the main thread: elsewhere (and where the
platform has no ``SIGVTALRM``) the time is measured and an evaluation over budget fails after the fact.
Cost: two ``setitimer`` calls, ~1 us, against 70-250 us for an evaluation.
"""

from __future__ import annotations

import gc
import signal
import threading
import time
from typing import Any, Optional

EVAL_CPU_BUDGET = 0.05          # seconds of CPU per evaluation (a typical one takes 0.07-0.25 ms)


class BudgetExceeded(BaseException):
    """Raised inside an evaluation that used up its budget."""


class _Timer:
    def __init__(self) -> None:
        self.armed = False
        self.gc_was_enabled = True
        self.usable: Optional[bool] = None       # decided on first use (needs the main thread)

    def _handler(self, signum: int, frame: Any) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0.01)    # again, should something swallow this one
            raise BudgetExceeded()

    def _install(self) -> bool:
        if not hasattr(signal, "SIGVTALRM") or threading.current_thread() is not threading.main_thread():
            return False
        if signal.getsignal(signal.SIGVTALRM) not in (signal.SIG_DFL, signal.SIG_IGN, None):
            return False                          # someone else (a profiler) owns it: measure only
        signal.signal(signal.SIGVTALRM, self._handler)
        return True

    def start(self, seconds: float) -> float:
        """Arm the timer (main thread) and return the CPU clock to check against afterwards."""
        if self.usable is None:
            self.usable = self._install()
        if self.usable and threading.current_thread() is threading.main_thread():
            self.gc_was_enabled = gc.isenabled()
            gc.disable()           # a collection of a big heap is not the expression's cost (nor interruptible)
            self.armed = True
            signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
        return time.thread_time()

    def stop(self) -> None:
        """Disarm; call in a ``finally`` right around the evaluation (a late signal is then ignored)."""
        if self.armed:
            self.armed = False
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            if self.gc_was_enabled:
                gc.enable()


TIMER = _Timer()


def over_budget(started: float, seconds: float) -> bool:
    """For the unarmed case: did the evaluation that started at ``started`` (thread CPU clock) overrun?"""
    return time.thread_time() - started > seconds
