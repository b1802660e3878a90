"""charts/atoll least privilege and Pod Security "restricted", on the rendered manifests.

The rules are derived from every API call in engine/kube (runner.py's watch caches and policy ConfigMap,
writer.py's merge patches and Events, kubernetes_asyncio's LeaseLock and runner.py's release of the Lease on
SIGTERM (the same get + update), webhook_cli.py's ConfigMap GET, the member pod watches through Karmada's
cluster proxy); a
new call there must be added here and to templates/rbac.yaml on purpose. The real API server's answers
(SelfSubjectAccessReview as each ServiceAccount) are in e2e/tests/test_chart_rbac.py.
"""

from __future__ import annotations

from typing import Any

from tests.charts.chart_support import Docs, needs_helm, pod_specs, render

Rule = tuple[str, str, str, tuple[str, ...]]   # (apiGroup, resource, verb, resourceNames)

CONTROLLER_CLUSTER_RULES: set[Rule] = {
    *{(g, r, v, ()) for g, r in [("cluster.karmada.io", "clusters"), ("scheduling.volcano.sh", "queues"),
                                 ("scheduling.k8s.io", "priorityclasses"), ("batch.volcano.sh", "jobs"),
                                 ("batch", "jobs"), ("apps", "deployments")] for v in ("list", "watch")},
    *{("work.karmada.io", r, v, ()) for r in ("resourcebindings", "clusterresourcebindings")
      for v in ("list", "watch", "patch")},
    ("work.karmada.io", "resourcebindings/status", "patch", ()),
    *{("work.karmada.io", "works", v, ()) for v in ("list", "watch")},
    ("work.karmada.io", "clusterresourcebindings/status", "patch", ()),
    ("", "events", "create", ()),
    ("cluster.karmada.io", "clusters/proxy", "get", ()),     # members' unbound pods (engine/kube/stuck.py)
}
POLICY = ("rel-atoll-policy",)
CONTROLLER_POLICY_RULES: set[Rule] = {("", "configmaps", v, POLICY) for v in ("get", "list", "watch")}
CONTROLLER_LEASE_RULES: set[Rule] = {("coordination.k8s.io", "leases", v, ("atoll-controller",))
                                     for v in ("get", "update")}
WEBHOOK_POLICY_RULES: set[Rule] = {("", "configmaps", "get", POLICY)}


def flat(role: dict[str, Any]) -> set[Rule]:
    return {(g, r, v, tuple(rule.get("resourceNames") or ())) for rule in role["rules"]
            for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def subjects(binding: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(s["kind"], s["name"], s.get("namespace", "")) for s in binding["subjects"]]


CTL_SA = ("ServiceAccount", "rel-atoll-controller", "atoll-system")
HOOK_SA = ("ServiceAccount", "rel-atoll-webhook", "atoll-system")


@needs_helm
def test_rbac_is_exactly_what_the_code_calls() -> None:
    docs = render()
    roles = {(k, n): d for (k, n), d in docs.items() if k in ("ClusterRole", "Role")}
    assert set(roles) == {("ClusterRole", "rel-atoll-controller"), ("Role", "rel-atoll-controller-policy"),
                          ("Role", "rel-atoll-controller-lease"), ("Role", "rel-atoll-webhook-policy")}
    assert flat(roles["ClusterRole", "rel-atoll-controller"]) == CONTROLLER_CLUSTER_RULES
    assert flat(roles["Role", "rel-atoll-controller-policy"]) == CONTROLLER_POLICY_RULES
    assert flat(roles["Role", "rel-atoll-controller-lease"]) == CONTROLLER_LEASE_RULES
    assert flat(roles["Role", "rel-atoll-webhook-policy"]) == WEBHOOK_POLICY_RULES
    for (kind, name), role in roles.items():
        if kind == "Role":
            assert role["metadata"]["namespace"] == "atoll-system", name
        for rule in role["rules"]:
            assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], (name, rule)
    # the Lease is the chart's own object, so `create` (which cannot be limited by name) is not granted
    lease = docs[("Lease", "atoll-controller")]
    assert lease["metadata"]["namespace"] == "atoll-system"


@needs_helm
def test_each_component_has_its_own_service_account() -> None:
    docs = render()
    assert {n for (k, n) in docs if k == "ServiceAccount"} == {"rel-atoll-controller", "rel-atoll-webhook"}
    expected = {("ClusterRoleBinding", "rel-atoll-controller"): [CTL_SA],
                ("RoleBinding", "rel-atoll-controller-policy"): [CTL_SA],
                ("RoleBinding", "rel-atoll-controller-lease"): [CTL_SA],
                ("RoleBinding", "rel-atoll-webhook-policy"): [HOOK_SA]}
    assert {key: subjects(d) for key, d in docs.items() if key[0].endswith("Binding")} == expected
    specs = pod_specs(docs)
    assert specs["rel-atoll-controller"]["serviceAccountName"] == "rel-atoll-controller"
    assert specs["rel-atoll-webhook"]["serviceAccountName"] == "rel-atoll-webhook"


@needs_helm
def test_policy_namespace_and_extra_subjects() -> None:
    docs = render("policyConfigMap.namespace=policies", "rbac.extraSubjects.controller[0].kind=User",
                  "rbac.extraSubjects.controller[0].name=atoll", "controller.leaderElection.enabled=false")
    assert docs[("Role", "rel-atoll-controller-policy")]["metadata"]["namespace"] == "policies"
    assert docs[("RoleBinding", "rel-atoll-webhook-policy")]["metadata"]["namespace"] == "policies"
    assert ("User", "atoll", "") in subjects(docs[("ClusterRoleBinding", "rel-atoll-controller")])
    assert ("Role", "rel-atoll-controller-lease") not in docs and ("Lease", "atoll-controller") not in docs


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """The Pod Security Standard "restricted" checks that depend on the chart (the API server enforces all of
    them in e2e/tests/test_chart_install.py)."""
    bad = []
    pod = spec.get("securityContext") or {}
    if (pod.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        bad.append("pod seccompProfile")
    for c in spec["containers"] + spec.get("initContainers", []):
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{c['name']}: allowPrivilegeEscalation")
        if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
            bad.append(f"{c['name']}: capabilities.drop")
        if not (sc.get("runAsNonRoot") or pod.get("runAsNonRoot")):
            bad.append(f"{c['name']}: runAsNonRoot")
        if sc.get("readOnlyRootFilesystem") is not True:
            bad.append(f"{c['name']}: readOnlyRootFilesystem")
    return bad


@needs_helm
def test_pods_meet_pod_security_restricted() -> None:
    docs: Docs = render("plugins.packages[0]=atoll-example-plugin")
    specs = pod_specs(docs)
    assert set(specs) == {"rel-atoll-controller", "rel-atoll-webhook"}
    for name, spec in specs.items():
        assert restricted_violations(spec) == [], name
        assert spec["initContainers"][0]["name"] == "install-plugins"
    # and the check itself notices a violation
    loose = pod_specs(render("securityContext.allowPrivilegeEscalation=true"))
    assert "controller: allowPrivilegeEscalation" in restricted_violations(loose["rel-atoll-controller"])
