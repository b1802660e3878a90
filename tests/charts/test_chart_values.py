"""charts/atoll values platform teams expect, subchart use, and renders that do not drift."""

from __future__ import annotations

import base64
import importlib.util
import ipaddress
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from cryptography import x509

from tests.charts.chart_support import CHART, ROOT, helm, needs_helm, one, pod_specs, render, render_text

EXAMPLE = ROOT / "e2e" / "plugins" / "atoll-example-plugin"

EXISTING_TLS = ("webhook.tls.existingSecret=atoll-tls", "webhook.tls.caBundle=Q0EK")


@needs_helm
def test_global_is_accepted_for_subchart_use() -> None:
    render("global.imageRegistry=example.org", "global.anything.nested=1")


@needs_helm
def test_two_renders_are_identical() -> None:
    """Nothing random or time-dependent in a render when the TLS material is given (existingSecret or
    cert-manager): GitOps sees no drift. (Generated TLS is reused from the cluster on upgrade: helm `lookup`,
    proven in e2e/tests/test_chart_install.py; offline renders cannot look up.)"""
    for sets in (EXISTING_TLS, ("webhook.tls.certManager.enabled=true",),
                 ("install.workloads=false", *EXISTING_TLS), ("install.karmadaObjects=false", *EXISTING_TLS)):
        assert render_text(*sets) == render_text(*sets), sets


@needs_helm
def test_generated_tls_differs_only_in_the_tls_material() -> None:
    def without_tls(text: str) -> list[dict[str, object]]:
        docs = [d for d in yaml.safe_load_all(text) if d]
        for d in docs:
            if d["kind"] == "Secret":
                d["data"] = {}
            if d["kind"] == "MutatingWebhookConfiguration":
                d["webhooks"][0]["clientConfig"].pop("caBundle")
        return docs
    assert without_tls(render_text()) == without_tls(render_text())


@needs_helm
def test_generated_cert_covers_the_service_and_the_webhook_url_host() -> None:
    for url, want_dns, want_ip in [("", None, None), ("https://atoll.example.org:8443/mutate", "atoll.example.org", None),
                                   ("https://127.0.0.1:9443/mutate", None, "127.0.0.1")]:
        docs = render(f"webhook.url={url}")
        secret = one(docs, "Secret")
        cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = san.get_values_for_type(x509.DNSName)
        assert "rel-atoll-webhook.atoll-system.svc" in dns
        if want_dns:
            assert want_dns in dns
        if want_ip:
            assert ipaddress.ip_address(want_ip) in san.get_values_for_type(x509.IPAddress)
        ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
        assert cert.issuer == ca.subject
        assert one(docs, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"] == \
            secret["data"]["ca.crt"]


@needs_helm
def test_platform_values() -> None:
    docs = render("priorityClassName=system-cluster-critical", "podAnnotations.team=ml", "podLabels.cost=gpu",
                  "controller.extraArgs[0]=--concurrency=64", "webhook.extraArgs[0]=--reload-interval=5",
                  "controller.extraEnv[0].name=FOO", "controller.extraEnv[0].value=bar",
                  "webhook.extraVolumes[0].name=extra", "webhook.extraVolumes[0].emptyDir.medium=Memory",
                  "webhook.extraVolumeMounts[0].name=extra", "webhook.extraVolumeMounts[0].mountPath=/extra",
                  "image.digest=sha256:" + "a" * 64, "metrics.serviceMonitor.enabled=true",
                  "metrics.serviceMonitor.labels.release=prometheus")
    deployments = {n: d for (k, n), d in docs.items() if k == "Deployment"}
    for name, spec in pod_specs(docs).items():
        meta = deployments[name]["spec"]["template"]["metadata"]
        assert spec["priorityClassName"] == "system-cluster-critical", name
        assert meta["annotations"] == {"team": "ml"} and meta["labels"]["cost"] == "gpu", name
        assert spec["containers"][0]["image"] == "ghcr.io/atoll-dev/atoll@sha256:" + "a" * 64
    specs = pod_specs(docs)
    ctrl, hook = specs["rel-atoll-controller"]["containers"][0], specs["rel-atoll-webhook"]["containers"][0]
    assert ctrl["args"][-1] == "--concurrency=64" and hook["args"][-1] == "--reload-interval=5"
    assert {"name": "FOO", "value": "bar"} in ctrl["env"]
    assert {"name": "extra", "mountPath": "/extra"} in hook["volumeMounts"]
    assert {"name": "extra", "emptyDir": {"medium": "Memory"}} in specs["rel-atoll-webhook"]["volumes"]
    svc = docs[("Service", "rel-atoll-metrics")]
    assert svc["spec"]["selector"]["app.kubernetes.io/component"] == "controller"
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics"}]
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics", "https"]
    assert ("ServiceMonitor", "rel-atoll") not in render()


@needs_helm
def test_plugin_packages_are_installed_by_an_init_container_onto_pythonpath() -> None:
    specs = pod_specs(render("plugins.packages[0]=my-plugins==1.2.0", "plugins.pipArgs[0]=--index-url",
                             "plugins.pipArgs[1]=https://pypi.internal/simple"))
    for name, spec in specs.items():
        (init,) = spec["initContainers"]
        assert init["command"][:4] == ["python", "-m", "pip", "install"]
        assert "--target" in init["command"] and "/etc/atoll/constraints.txt" in init["command"]
        assert init["args"] == ["--index-url", "https://pypi.internal/simple", "my-plugins==1.2.0"]
        main = spec["containers"][0]
        assert {"name": "PYTHONPATH", "value": "/opt/atoll/plugins"} in main["env"], name
        assert {"name": "plugins", "mountPath": "/opt/atoll/plugins", "readOnly": True} in main["volumeMounts"]
    assert "initContainers" not in pod_specs(render())["rel-atoll-controller"]


@needs_helm
def test_schema_rejects_unknown_values() -> None:
    out = helm("template", "rel", str(CHART), "--set", "controller.extraArg=oops")
    assert out.returncode != 0 and "extraArg" in out.stderr


@needs_helm
def test_the_plugin_init_container_command_installs_a_discoverable_plugin(tmp_path: Path) -> None:
    """The init container's own pip command (pod paths mapped to local ones) on the example plugin package, then
    `atoll plugins list` with the chart's PYTHONPATH finds it through its entry point."""
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    spec = pod_specs(render(f"plugins.packages[0]={source}"))["rel-atoll-controller"]
    (init,) = spec["initContainers"]
    target = tmp_path / "plugins"
    paths = {"/opt/atoll/plugins": str(target), "/etc/atoll/constraints.txt": str(CHART / "constraints.txt")}
    argv = [sys.executable if a == "python" else paths.get(a, a) for a in init["command"]]
    if importlib.util.find_spec("wheel") is not None:
        argv.append("--no-build-isolation")          # offline here; in a pod pip may fetch build backends
    out = subprocess.run(argv + init["args"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert not (target / "engine").exists(), "--no-deps: the plugin's `atoll` requirement was not installed"
    env_path = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}["PYTHONPATH"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([env_path.replace("/opt/atoll/plugins", str(target)),
                                                        str(ROOT)]))
    listed = subprocess.run([sys.executable, "-m", "engine.cli", "plugins", "list", "--json"], capture_output=True,
                            text=True, env=env, timeout=120, cwd=str(ROOT))
    assert listed.returncode == 0, listed.stderr
    assert "max-attempts" in {row["name"] for row in json.loads(listed.stdout)}
