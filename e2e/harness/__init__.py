"""Atoll e2e harness: a real Karmada fleet (host + kwok-backed members) on 127.0.0.1.

Entry point: ``e2e/fleet up|down|status|env|build|logs``; pytest fixtures in ``e2e/conftest.py``.
"""
