"""``atoll webhook`` (serve admission) and ``atoll bench-webhook`` (latency at a fixed rate)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
from typing import Any, Optional

import uvloop

from engine.commands.args import count, non_negative, port, positive
from engine.commands.output import add_output, emit
from engine.errors import InputError, UsageError
from engine.kube import access
from engine.kube.webhook import ManagedSelector, selector_from_policy
from engine.kube.shutdown import SHUTDOWN_DELAY, Shutdown
from engine.kube.webhook_server import WebhookServer, serve
from engine.policy import load_policy_text


def selector_from_text(text: str, source: str) -> ManagedSelector:
    """Which workloads the policy manages; the policy is fully validated (a bad one is refused)."""
    return selector_from_policy(load_policy_text(text, source))


def selector_from_file(path: str) -> ManagedSelector:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read policy: {exc.strerror}", path) from None
    return selector_from_text(text, path)


async def _configmap_selector(ref: str, kubeconfig: Optional[str], context: Optional[str] = None) -> ManagedSelector:
    """GET the policy ConfigMap (key ``policy.yaml``) from the Karmada API; polled by the server."""
    from kubernetes_asyncio import client

    namespace, _, name = ref.partition("/")
    if not namespace or not name:
        raise UsageError("expected NAMESPACE/NAME", "--policy-configmap")
    await access.load(kubeconfig, context)
    async with client.ApiClient() as api:
        with access.api_errors(f"reading the policy ConfigMap {ref}"):
            cm = await asyncio.wait_for(client.CoreV1Api(api).read_namespaced_config_map(name, namespace), 30)
    data = cm.data or {}
    text = data.get("policy.yaml") or next(iter(data.values()), "")
    return selector_from_text(text, f"configmap {ref}")


async def _serve_until_stopped(server: WebhookServer, args: argparse.Namespace) -> None:
    """Serve until SIGTERM/SIGINT, then for --shutdown-delay more seconds (answering as before), then stop
    (answering the requests under way); a second signal exits at once."""
    shutdown = Shutdown("atoll webhook")
    shutdown.install()
    try:
        await serve(server, args.host, args.port, args.cert, args.key, args.reload_interval,
                    stop=shutdown.requested, shutdown_delay=args.shutdown_delay)
    finally:
        shutdown.uninstall()


def _run_webhook(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if bool(args.cert) != bool(args.key):
        raise UsageError("--cert and --key go together")
    if not args.cert and not args.insecure_http:
        raise UsageError("--cert/--key required (or --insecure-http for local debugging)")
    for flag, path in (("--cert", args.cert), ("--key", args.key)):
        if path:
            _check_pem(flag, path)
    if args.policy:
        path = args.policy
        server = WebhookServer(selector_from_file(path), lambda: selector_from_file(path), (path,))
    elif args.policy_configmap:
        ref, kubeconfig, context = args.policy_configmap, args.kubeconfig, args.context
        server = WebhookServer(asyncio.run(_configmap_selector(ref, kubeconfig, context)),
                               async_loader=lambda: _configmap_selector(ref, kubeconfig, context))
    else:
        server = WebhookServer(ManagedSelector())
    try:
        uvloop.run(_serve_until_stopped(server, args))
    except ssl.SSLError as exc:
        raise InputError(f"cannot use the certificate and key: {exc.reason or exc}", args.cert) from None
    except OSError as exc:
        raise InputError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    return 0


def _check_pem(flag: str, path: str) -> None:
    """A missing or unreadable certificate or key is named before the server starts."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise InputError(f"{flag}: cannot read: {exc.strerror or exc}", path) from None
    if b"-----BEGIN" not in head:
        raise InputError(f"{flag}: not a PEM file", path)


def _run_bench(args: argparse.Namespace) -> int:
    from engine.kube.webhook_bench import run_bench

    result: dict[str, Any] = uvloop.run(run_bench(rate=args.rate, count=args.requests, url=args.url,
                                                   concurrency=args.concurrency))
    emit(result, args.output)
    if args.max_p99_ms is not None and result["latency_ms"]["p99"] > args.max_p99_ms:
        return 1
    return 0


def register(subparsers: Any, _: Optional[Any] = None) -> None:
    p = subparsers.add_parser("webhook", help="serve the mutating admission webhook that pauses bindings")
    p.add_argument("--cert", help="TLS certificate (PEM); reloaded when the file changes")
    p.add_argument("--key", help="TLS private key (PEM)")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=port, default=9443)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--policy", help="policy YAML file; reloaded when it changes")
    src.add_argument("--policy-configmap", metavar="NS/NAME",
                     help="read the policy from a ConfigMap on the Karmada API, polled every 5 reload intervals")
    access.add_arguments(p, "the Karmada API (for --policy-configmap)")
    p.add_argument("--reload-interval", type=positive, default=2.0, help="seconds between file checks")
    p.add_argument("--insecure-http", action="store_true", help="serve plain HTTP (debugging only)")
    p.add_argument("--shutdown-delay", type=non_negative, default=SHUTDOWN_DELAY, metavar="SECONDS",
                   help="on SIGTERM/SIGINT, keep answering this long before closing the listener, while the "
                        f"Service's endpoints drop the pod (default {SHUTDOWN_DELAY:g}; 0: close at once; keep it "
                        "plus 10 s well under the pod's terminationGracePeriodSeconds)")
    p.set_defaults(func=_run_webhook)

    b = subparsers.add_parser("bench-webhook", help="AdmissionReviews over TLS at a fixed rate; print JSON")
    b.add_argument("--rate", type=positive, default=200.0, help="requests per second")
    b.add_argument("--requests", type=count(1), default=4000)
    b.add_argument("--concurrency", type=count(1), default=64, help="max requests in flight")
    b.add_argument("--url", help="benchmark an existing webhook instead of starting one in-process")
    b.add_argument("--max-p99-ms", type=float, help="exit 1 when p99 exceeds this")
    add_output(b, ("json", "yaml"), "json")
    b.set_defaults(func=_run_bench)
