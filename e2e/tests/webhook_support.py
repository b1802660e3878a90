"""Run `atoll webhook` as a subprocess and register it on the fleet's karmada-apiserver."""

from __future__ import annotations

import base64
import os
import random
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from e2e.harness.kube import Kube
from e2e.tests.support import delete
from engine.kube.webhook_certs import CertFiles, write_certs

MWC_NAME = "atoll-e2e-webhook"


LISTEN_PORTS = range(20000, 28000)   # below the fleets' blocks and the kernel's ephemeral range


def free_port() -> int:
    """A free port for a process the test starts. Not from bind(0): that hands out an ephemeral port, which a
    client socket may take in the second before the process listens on it."""
    for port in random.sample(LISTEN_PORTS, 50):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {LISTEN_PORTS.start}-{LISTEN_PORTS.stop - 1}")


@dataclass
class WebhookProcess:
    proc: subprocess.Popen[bytes]
    port: int
    certs: CertFiles
    log: Path

    def stop(self) -> None:
        terminate(self.proc)


def child_env(workdir: Path) -> dict[str, str]:
    """The environment of an atoll process a test starts: ours, with $TMPDIR in the test's ``workdir`` (pytest's
    tmp_path_factory, kept for its last 3 runs). kubernetes_asyncio writes a kubeconfig's CA data to a temporary
    file and removes it only at a normal exit (atexit); `atoll run` stopped by SIGTERM or SIGKILL, as the tests
    stop it, left one in /tmp each time (~830 files after a day of runs)."""
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp)}


def terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 10 s (a test must never leave a process behind)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def start_webhook(workdir: Path, policy: Optional[Path] = None) -> WebhookProcess:
    certs = write_certs(str(workdir / "certs"))
    port = free_port()
    log = workdir / "webhook.log"
    argv = [sys.executable, "-m", "engine.cli", "webhook", "--cert", certs.cert, "--key", certs.key,
            "--host", "127.0.0.1", "--port", str(port), "--shutdown-delay=0"]   # no Service to drain
    if policy is not None:
        argv += ["--policy", str(policy)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=str(Path(__file__).parents[2]),
                                env=child_env(workdir))
    wh = WebhookProcess(proc, port, certs, log)
    wait_serving("atoll webhook", f"https://127.0.0.1:{port}/readyz", proc, wh.stop, log, 30,
                 ssl.create_default_context(cafile=certs.ca))
    return wh


def wait_serving(what: str, url: str, proc: subprocess.Popen[bytes], stop: Callable[[], None], log: Path, timeout: float,
                 context: Optional[ssl.SSLContext] = None) -> None:
    """Until ``url`` answers 200; if the process exits or the deadline passes, stop it and raise with its log."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, context=context, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop()
            raise RuntimeError(f"{what} did not start serving {url}; log {log}:\n"
                               f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def webhook_configuration(wh: WebhookProcess, failure_policy: str = "Ignore") -> dict[str, Any]:
    """The same registration the chart renders, but with a URL to the local process."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": MWC_NAME},
        "webhooks": [{
            "name": "pause-bindings.atoll.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": failure_policy, "timeoutSeconds": 5, "matchPolicy": "Equivalent",
            "clientConfig": {"url": f"https://127.0.0.1:{wh.port}/mutate",
                             "caBundle": base64.b64encode(wh.certs.ca_pem()).decode()},
            "rules": [{"apiGroups": ["work.karmada.io"], "apiVersions": ["v1alpha2"], "operations": ["CREATE"],
                       "resources": ["resourcebindings", "clusterresourcebindings"], "scope": "*"}],
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                 "values": ["karmada-system", "karmada-cluster", "kube-system", "kube-public", "kube-node-lease"]}]},
        }],
    }


def registered(kube: Kube, wh: WebhookProcess, failure_policy: str = "Ignore") -> Iterator[None]:
    kube.apply(webhook_configuration(wh, failure_policy))
    try:
        yield
    finally:
        delete(kube, f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{MWC_NAME}")
