"""Reaching the Karmada API from the CLI: ``--kubeconfig``/``--context`` as kubectl reads them, and every way
that can fail (no or a broken kubeconfig, an unknown context, an unreachable or refusing API server) as one
InputError line, never a traceback.

Order, as kubectl: ``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``, else the in-cluster
ServiceAccount; ``--context`` picks a context of that kubeconfig (default: its current-context).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from engine.errors import InputError


def add_arguments(parser: argparse.ArgumentParser, what: str = "the Karmada API") -> None:
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help=f"kubeconfig of {what} (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use (default: its current-context)")


def _where(kubeconfig: Optional[str]) -> str:
    return kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"


async def load(kubeconfig: Optional[str], context: Optional[str] = None) -> None:
    """Configure kubernetes_asyncio's default client; InputError naming the kubeconfig on any failure."""
    from kubernetes_asyncio import config

    default = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
    try:
        if kubeconfig or context or os.path.exists(default):
            if kubeconfig and not os.path.isfile(kubeconfig):
                raise InputError("kubeconfig not found" if not os.path.exists(kubeconfig) else
                                 "kubeconfig is not a file", kubeconfig)
            await config.load_kube_config(config_file=kubeconfig, context=context)
        else:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                raise InputError("no kubeconfig (give --kubeconfig, set $KUBECONFIG or create ~/.kube/config) "
                                 "and not running in a cluster") from None
    except InputError:
        raise
    except Exception as exc:      # ConfigException, YAML errors, bad certificates/base64, missing files ...
        raise InputError(f"cannot use kubeconfig{f' context {context!r}' if context else ''}: "
                         f"{_one_line(exc)}", _where(kubeconfig)) from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300] + ("..." if len(text) > 300 else "")


def _server() -> str:
    try:
        from kubernetes_asyncio.client import Configuration

        return str(Configuration.get_default_copy().host or "the API server")
    except Exception:
        return "the API server"


@contextmanager
def api_errors(what: str) -> Iterator[None]:
    """Turn connection and HTTP errors while doing ``what`` into one InputError line."""
    import aiohttp
    from kubernetes_asyncio.client.exceptions import ApiException

    try:
        yield
    except ApiException as exc:
        hint = {401: " (the kubeconfig's credentials were refused)",
                403: " (the kubeconfig's user may not do this)"}.get(exc.status or 0, "")
        raise InputError(f"{what}: the API server answered {exc.status} {exc.reason}{hint}", _server()) from None
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
        raise InputError(f"{what}: cannot reach the API server: {_one_line(exc)}", _server()) from None


async def probe(api_client: Any, timeout: float = 10.0) -> None:
    """One GET /version, so an unreachable or refusing API server is an error at start, not a silent retry
    loop (the watch caches retry forever, by design, once running)."""
    from kubernetes_asyncio import client

    with api_errors("checking the API server"):
        await asyncio.wait_for(client.VersionApi(api_client).get_code(), timeout)
