"""charts/atoll: the dashboard Service and flags are off by default and complete when enabled."""

from __future__ import annotations

from tests.charts.test_chart import needs_helm, render


@needs_helm
def test_dashboard_is_off_by_default() -> None:
    docs = render()
    assert ("Service", "rel-atoll-dashboard") not in docs
    args = docs[("Deployment", "rel-atoll-controller")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any(a.startswith("--dashboard") for a in args)


@needs_helm
def test_dashboard_enabled_serves_on_its_port_behind_a_service() -> None:
    docs = render("controller.dashboard.enabled=true", "controller.dashboard.port=8095")
    container = docs[("Deployment", "rel-atoll-controller")]["spec"]["template"]["spec"]["containers"][0]
    assert "--dashboard-port=8095" in container["args"] and "--dashboard-address=0.0.0.0" in container["args"]
    assert {"name": "dashboard", "containerPort": 8095} in container["ports"]
    service = docs[("Service", "rel-atoll-dashboard")]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "dashboard", "port": 8095, "targetPort": "dashboard"}]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "controller"
