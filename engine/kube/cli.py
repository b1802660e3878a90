"""``atoll run`` (the controller) and ``atoll explain NAMESPACE/NAME`` (why a job waits)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import urllib.parse
import urllib.request
from typing import Any, Optional

import uvloop

from engine.commands.args import count, non_negative, port
from engine.commands.output import add_output, emit
from engine.errors import InputError, UsageError
from engine.kube import access, plan
from engine.kube.bindings import addressed_unplaced
from engine.kube.runner import Options, Runner
from engine.kube.shutdown import SHUTDOWN_TIMEOUT


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a positive number of seconds")
    return value


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    opts = Options(policy_configmap=args.policy_configmap, policy_file=args.policy, kubeconfig=args.kubeconfig,
                   context=args.context,
                   metrics_host=args.metrics_host, metrics_port=args.metrics_port, leader_elect=args.leader_elect,
                   lease_name=args.lease_name, lease_namespace=args.lease_namespace,
                   concurrency=args.concurrency, identity=args.identity or "", watch_timeout=args.watch_timeout,
                   stuck_after=args.stuck_after, cluster_status_period=args.cluster_status_period,
                   dashboard_port=args.dashboard_port, dashboard_host=args.dashboard_address,
                   shutdown_timeout=args.shutdown_timeout)
    return uvloop.run(Runner(opts).main())


async def _binding(ref: str, kubeconfig: Optional[str], context: Optional[str] = None) -> dict[str, Any]:
    """The ResourceBinding named NAME, or the one whose template is named NAME, in NAMESPACE."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    ns, _, name = ref.partition("/")
    if not ns or not name:
        raise UsageError("expected NAMESPACE/NAME (a ResourceBinding or its workload)", ref)
    await access.load(kubeconfig, context)
    async with client.ApiClient() as api:
        custom = client.CustomObjectsApi(api)
        with access.api_errors(f"reading ResourceBinding {ref}"):
            try:
                found: dict[str, Any] = await asyncio.wait_for(custom.get_namespaced_custom_object(
                    "work.karmada.io", "v1alpha2", ns, "resourcebindings", name), 30)
                return found
            except ApiException as exc:
                if exc.status != 404:
                    raise
            listed = await asyncio.wait_for(custom.list_namespaced_custom_object(
                "work.karmada.io", "v1alpha2", ns, "resourcebindings"), 30)
    matches = [b for b in listed.get("items", []) if (b.get("spec", {}).get("resource") or {}).get("name") == name]
    if not matches:
        raise InputError("no ResourceBinding with that name, nor one for a workload of that name", ref)
    return dict(matches[0])


def describe_binding(binding: dict[str, Any]) -> str:
    """Human lines from the annotations the controller writes and the binding's own state."""
    m = binding.get("metadata", {})
    annotations = m.get("annotations") or {}
    spec = binding.get("spec", {})
    res = spec.get("resource") or {}
    paused = (spec.get("suspension") or {}).get("scheduling") is True
    unplaced = not paused and addressed_unplaced(binding) and not annotations.get(plan.ADMITTED_ANNOTATION)
    lines = [f"binding {m.get('namespace')}/{m.get('name')} for {res.get('kind')} {res.get('name')}",
             f"queue: {annotations.get(plan.QUEUE_ANNOTATION, '(not yet seen by the controller)')}"]
    if annotations.get(plan.ADMITTED_ANNOTATION) and not paused:
        lines.append(f"admitted at {annotations[plan.ADMITTED_ANNOTATION]}")
        clusters = [c.get("name") for c in spec.get("clusters") or ()]
        lines.append(f"placed on: {', '.join(clusters) if clusters else '(karmada-scheduler has not placed it yet)'}")
    elif paused:
        lines.append("state: waiting (spec.suspension.scheduling is true)")
        lines.append(f"why: {annotations.get(plan.PENDING_ANNOTATION, '(no reason recorded yet)')}")
    elif unplaced:
        lines.append("state: waiting (schedulerName atoll, no spec.clusters yet)")
        lines.append(f"why: {annotations.get(plan.PENDING_ANNOTATION, '(no reason recorded yet)')}")
    else:
        lines.append("state: not paused and not admitted by Atoll (unmanaged, or created while the webhook was off)")
    if annotations.get(plan.EVICTING_ANNOTATION):
        lines.append(f"evicting since {annotations[plan.EVICTING_ANNOTATION]}: its workload is being removed from "
                     "its members")
    if annotations.get(plan.PREEMPTED_BY_ANNOTATION):
        lines.append(f"preempted by {annotations[plan.PREEMPTED_BY_ANNOTATION]} "
                     f"({annotations.get(plan.PREEMPTIONS_ANNOTATION, '?')} time(s) in all)")
    return "\n".join(lines)


def binding_summary(binding: dict[str, Any]) -> dict[str, Any]:
    """What ``describe_binding`` says, as data (``atoll explain -o json|yaml``)."""
    m = binding.get("metadata", {})
    annotations = m.get("annotations") or {}
    spec = binding.get("spec", {})
    res = spec.get("resource") or {}
    scheduling_paused = (spec.get("suspension") or {}).get("scheduling") is True
    admitted = bool(annotations.get(plan.ADMITTED_ANNOTATION)) and not scheduling_paused
    waiting = not admitted and (scheduling_paused or addressed_unplaced(binding))
    return {"binding": f"{m.get('namespace')}/{m.get('name')}", "kind": res.get("kind"), "workload": res.get("name"),
            "queue": annotations.get(plan.QUEUE_ANNOTATION),
            "state": "admitted" if admitted else "waiting" if waiting else "unmanaged",
            "admittedAt": annotations.get(plan.ADMITTED_ANNOTATION) if admitted else None,
            "placedOn": [c.get("name") for c in spec.get("clusters") or ()],
            "why": annotations.get(plan.PENDING_ANNOTATION) if waiting else None}


def _live(controller: str, binding: dict[str, Any]) -> tuple[Optional[str], Optional[str]]:
    """(the live engine's explanation, or None and why it could not be asked)."""
    m = binding.get("metadata", {})
    key = urllib.parse.quote(f"{m.get('namespace')}/{m.get('name')}")
    try:
        with urllib.request.urlopen(f"{controller.rstrip('/')}/explain?job={key}", timeout=5) as resp:
            return resp.read().decode().strip(), None
    except (OSError, ValueError) as exc:
        return None, f"unreachable at {controller} ({exc})"


def _explain(args: argparse.Namespace) -> int:
    binding = asyncio.run(_binding(args.ref, args.kubeconfig, args.context))
    live, problem = _live(args.controller, binding) if args.controller else (None, None)
    if args.output != "text":
        data = binding_summary(binding)
        if args.controller:
            data["live"] = live if live is not None else {"error": problem}
        emit(data, args.output)
        return 0
    print(describe_binding(binding))
    if args.controller:
        print("live engine:\n  " + live.replace("\n", "\n  ") if live is not None else f"live engine: {problem}")
    return 0


def register(subparsers: Any, _: Optional[Any] = None) -> None:
    p = subparsers.add_parser("run", help="run the controller against a Karmada API (gate or bind mode)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--policy-configmap", metavar="NS/NAME", help="policy ConfigMap (key policy.yaml); hot-reloaded")
    src.add_argument("--policy", metavar="FILE", help="policy file (no reload)")
    access.add_arguments(p)
    p.add_argument("--metrics-port", type=port, default=8080, help="serves /metrics, /healthz, /explain?job=NS/NAME")
    p.add_argument("--metrics-host", default="0.0.0.0")
    p.add_argument("--leader-elect", action="store_true", help="lead through a coordination.k8s.io Lease")
    p.add_argument("--lease-name", default="atoll-controller")
    p.add_argument("--lease-namespace", default="atoll-system")
    p.add_argument("--identity", help="leader-election identity (default: hostname-pid)")
    p.add_argument("--concurrency", type=count(1), default=32, help="binding patches in flight at most")
    p.add_argument("--stuck-after", type=non_negative, default=20.0, metavar="SECONDS",
                   help="a pod Unschedulable in its member this long fails its job there (recover stage); watches "
                        "members' unbound pods through Karmada's cluster proxy; 0 turns that off")
    p.add_argument("--cluster-status-period", type=_positive_seconds, default=10.0, metavar="SECONDS",
                   help="karmada-controller-manager's --cluster-status-update-frequency (default 10): an admitted "
                        "job's reservation ends this long (plus 5 s) after its start when its cluster's status "
                        "does not change")
    p.add_argument("--dashboard-port", type=port, default=None, metavar="N",
                   help="serve the read-only web dashboard on this port (default: off; see docs/dashboard.md)")
    p.add_argument("--dashboard-address", default="127.0.0.1", metavar="ADDR",
                   help="address the dashboard binds (default 127.0.0.1: this machine only; 0.0.0.0 in a pod)")
    p.add_argument("--watch-timeout", type=count(1), default=60, metavar="SECONDS",
                   help="the API server ends each watch after this long; it is reopened from the last version")
    p.add_argument("--shutdown-timeout", type=_positive_seconds, default=SHUTDOWN_TIMEOUT, metavar="SECONDS",
                   help="on SIGTERM/SIGINT, how long the writes in flight may take before they are cancelled "
                        f"(default {SHUTDOWN_TIMEOUT:g}; keep it well under the pod's terminationGracePeriodSeconds)")
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=_run)

    e = subparsers.add_parser("explain", help="why a job waits: NAMESPACE/NAME of a binding or its workload")
    e.add_argument("ref", metavar="NAMESPACE/NAME")
    access.add_arguments(e)
    add_output(e, ("text", "json", "yaml"), "text")
    e.add_argument("--controller", metavar="URL", help="also ask the live engine, e.g. http://127.0.0.1:8080")
    e.set_defaults(func=_explain)
