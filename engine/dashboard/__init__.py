"""Atoll's read-only web dashboard: view-model (``view``, ``jobs``), adapter facts (``source``), aiohttp app (``app``)."""
