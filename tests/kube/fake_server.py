"""An in-memory API server's aiohttp app served on a local port, with a kubernetes-asyncio client talking to it."""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator

from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client


@contextlib.asynccontextmanager
async def api_client_for(app: web.Application) -> AsyncIterator[Any]:
    """A kubernetes-asyncio ApiClient whose requests ``app`` answers; the server is closed on exit."""
    server = TestServer(app)
    await server.start_server()
    cfg = client.Configuration(host=str(server.make_url("")).rstrip("/"))
    try:
        async with client.ApiClient(cfg) as api_client:
            yield api_client
    finally:
        await server.close()
