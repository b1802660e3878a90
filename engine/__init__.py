"""Atoll: a multi-cluster batch scheduler for Karmada fleets.

The package is split the way Kueue splits scheduler/cache/queue: ``engine.core`` is
pure and synchronous (data in, decisions out); ``engine.sim`` and ``engine.kube`` are
thin asyncio adapters that feed it. Plugins talk to the engine only through
``engine.hookspecs``.
"""

__version__ = "0.1.0"
