"""SIGTERM / SIGINT as a graceful stop for ``atoll run`` and ``atoll webhook`` (what controller-runtime and kopf do).

Kubernetes stops a pod with SIGTERM, then SIGKILL after ``terminationGracePeriodSeconds`` (the chart sets 30).
Python's default SIGTERM action kills the process at once: no ``finally``, no atexit hook, the leader Lease
kept until it expires. ``Shutdown.install`` puts handlers on the running loop instead: the first signal sets
``requested`` (the commands then stop taking work, finish what is in flight within their timeout and exit 0);
a second one, while that runs, exits at once with status 1.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Callable, Optional

log = logging.getLogger("atoll.shutdown")

SIGNALS = (signal.SIGTERM, signal.SIGINT)
SHUTDOWN_TIMEOUT = 10.0
"""Seconds ``atoll run`` waits for the writes in flight (and the webhook for its requests) once asked to stop;
with the Lease release (5 s at most) it stays well inside the chart's terminationGracePeriodSeconds (30)."""
SHUTDOWN_DELAY = 5.0
"""Seconds ``atoll webhook`` keeps answering after the first signal, before it closes its listener
(``--shutdown-delay``): a pod being deleted leaves the Service's endpoints only once the endpoints controller and
every kube-proxy (or the API server's own endpoint cache) have caught up, and a review sent to a closed listener
meanwhile is, with ``failurePolicy: Ignore``, a binding created unpaused. Like a ``preStop`` sleep, but in the
process: the image needs no ``sleep`` binary and the cluster no PodLifecycleSleepAction (Kubernetes 1.30+)."""
FORCED_EXIT = 1


class Shutdown:
    def __init__(self, name: str, force_exit: Callable[[int], object] = os._exit) -> None:
        self.name = name
        self.requested = asyncio.Event()
        self.on_request: list[Callable[[], None]] = []
        self._force_exit = force_exit
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def install(self) -> None:
        """Handle SIGTERM and SIGINT on the running loop (uvloop supports add_signal_handler)."""
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            loop.add_signal_handler(sig, self.signal, sig)
        self._loop = loop

    def uninstall(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            for sig in SIGNALS:
                self._loop.remove_signal_handler(sig)
        self._loop = None

    def signal(self, sig: int) -> None:
        name = signal.Signals(sig).name
        if self.requested.is_set():
            log.warning("%s: %s again while stopping; exiting at once (status %d)", self.name, name, FORCED_EXIT)
            for handler in logging.getLogger().handlers:
                handler.flush()
            self._force_exit(FORCED_EXIT)
            return
        log.info("%s: %s received; stopping gracefully (send it again to exit at once)", self.name, name)
        self.request()

    def request(self) -> None:
        if self.requested.is_set():
            return
        self.requested.set()
        for callback in self.on_request:
            callback()
