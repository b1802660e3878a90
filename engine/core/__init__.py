"""The pure, synchronous core: fleet state (the cache) and the scheduling cycle.

No asyncio, no I/O, no Kubernetes types: adapters feed changes in and carry
decisions out, so a simulation exercises exactly what production runs.
"""
