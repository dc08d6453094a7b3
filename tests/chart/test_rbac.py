"""The rendered RBAC covers every API call the operator makes and no more.

Calls are derived from the code: the kopf handlers the operator registers (their resources; watching
handlers list+watch, timers also patch for their finalizer and progress), kopf's own calls (CRD scanning,
Events), and every kubernetes-client call in the operator's modules (read from the source, not guessed).
The checker (``frwatch_dev.localcluster.rbac``) is tested on hand-made audit logs, and the audit
proxy (``localcluster.audit``) on real HTTP against the emulator. ``tests/operator/test_full_incident.py``
records the real operator's calls through a whole incident (remediation on, dry-run off) with the proxy
and checks them with the same function, both ways (nothing denied; every rule used, or justified)::

    from frwatch_dev.localcluster.audit import start_audit_proxy
    from frwatch_dev.localcluster.rbac import check, grants_for
    coverage = check(proxy.entries_for("frwatch-operator"), grants_for(rendered_docs, "frwatch", "frwatch-system"))
    assert not coverage.denied, coverage.explain()
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
from chart_helpers import CHART, NAMESPACE, ROOT, render

from frwatch_dev.localcluster.audit import AuditEntry, audit_entry
from frwatch_dev.localcluster.rbac import Coverage, check, grants_for
from frwatch_operator import constants as c
from frwatch_operator.config import Config, load_config
from frwatch_operator.main import namespaces_of

SA = "frwatch"
OPERATOR_SRC = ROOT / "operator" / "frwatch_operator"
#: Modules that are not the operator (the emulator, test workloads, the agent: it talks to S3 only).
NOT_OPERATOR = ("localcluster", "workloads", "demo", "agent")
#: Any namespace a training job may live in (a call there needs a cluster-wide grant).
JOB_NS = "some-team"
#: Modules whose calls happen only with webhook.tls.mode=operator (the operator's own webhook certificate).
OPERATOR_TLS_ONLY = ("webhook_cert_secret.py",)
#: The module that reads and writes the operator's own Secrets of the release namespace: the agents' key
#: ring always, the webhook's certificate in tls.mode=operator.
OWN_SECRETS = "own_secrets.py"


def call(
    verb: str, group: str, resource: str, namespace: str = "", name: str = "", sub: str = ""
) -> AuditEntry:
    return AuditEntry("op", "static", verb, group, "v1", resource, sub, namespace, name, "", 200)


# --- deriving the calls from the code -------------------------------------------------------------------


ALL_KINDS = ",".join(c.JOB_KINDS)


def kopf_calls(*, namespaced: bool = False, kinds: str = ALL_KINDS) -> list[AuditEntry]:
    """What kopf does for the operator's registry and settings (main.run: standalone; clusterwide, or
    ``namespaced``: FRWATCH_OPERATOR_NAMESPACES set, when kopf also lists and watches namespaces)."""
    import kopf
    from kubernetes import client

    from frwatch_operator.detect.observations import Observations
    from frwatch_operator.handlers import Deps, register_all
    from frwatch_operator.kube.adapter import Kube
    from frwatch_operator.webhook import JobIndex

    registry = kopf.OperatorRegistry()
    config = load_config({"FRWATCH_OPERATOR_JOB_KINDS": kinds})
    register_all(registry, Deps(config, JobIndex(), Observations(), Kube(client.ApiClient()), None))  # type: ignore[arg-type]
    calls = [call("list", "apiextensions.k8s.io", "customresourcedefinitions"),
             call("watch", "apiextensions.k8s.io", "customresourcedefinitions"),
             call("create", "", "events", JOB_NS)]  # fmt: skip
    if namespaced:  # kopf's namespace_observer: match the patterns, follow namespaces created later
        calls += [call("list", "", "namespaces"), call("watch", "", "namespaces")]
    for handler in registry._watching.get_all_handlers():
        s = handler.selector
        calls += [call(v, s.group, s.any_name) for v in ("list", "watch")]
    for handler in registry._spawning.get_all_handlers() + registry._changing.get_all_handlers():
        s = handler.selector
        calls += [call(v, s.group, s.any_name) for v in ("list", "watch")]
        calls.append(call("patch", s.group, s.any_name, JOB_NS, "x"))  # finalizer, progress annotations
    return calls


_CLIENT_METHOD = re.compile(
    r"^(?P<verb>read|get|list|create|patch|replace|delete)_(?P<ns>namespaced_)?(?P<kind>[a-z_]+?)"
    r"(?P<status>_status|_log)?(?P<all>_for_all_namespaces)?$"
)
_VERB = {"read": "get", "replace": "update"}
_PLURAL = {"config_map": "configmaps", "custom_object": "?",
           "mutating_webhook_configuration": "mutatingwebhookconfigurations"}  # fmt: skip
_GROUP_OF_API = {"core": "", "batch": "batch", "admission": "admissionregistration.k8s.io",
                 "coordination": "coordination.k8s.io"}  # fmt: skip


def client_calls(tls_mode: str = "helm", kinds: str = ALL_KINDS, *, nvsentinel: bool = False) -> list[AuditEntry]:
    """Every ``<x>.core|batch|custom|admission|coordination.<method>(...)`` call in the operator's modules, as RBAC sees
    it (the modules of ``OPERATOR_TLS_ONLY`` only when ``tls_mode`` is ``operator``; a call on the training job
    once per enabled kind, a Trainer runtime's only with TrainJob)."""
    from frwatch_operator.kinds.job_kind import enabled_kinds

    config = Config()
    enabled = enabled_kinds(kinds)
    calls: list[AuditEntry] = []
    for path in sorted(OPERATOR_SRC.rglob("*.py")):
        if any(part in NOT_OPERATOR for part in path.relative_to(OPERATOR_SRC).parts):
            continue
        tls_only = path.name in OPERATOR_TLS_ONLY
        if tls_only and tls_mode != "operator":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            if not (
                isinstance(owner, ast.Attribute) and owner.attr in ("core", "batch", "custom", "admission", "coordination")
            ):
                continue
            m = _CLIENT_METHOD.match(node.func.attr)
            assert m, f"{path.name}: {node.func.attr}: a client call this test cannot classify; teach it"
            verb = _VERB.get(m["verb"], m["verb"])
            namespace = "" if m["verb"] == "list" and not m["ns"] else JOB_NS
            sub = m["status"].lstrip("_") if m["status"] else ""
            if owner.attr == "custom":
                text = ast.unparse(node)
                if "INCIDENT_PLURAL" in text:
                    group, resource = c.GROUP, c.INCIDENT_PLURAL
                elif "POLICY_PLURAL" in text:
                    group, resource = c.GROUP, c.POLICY_PLURAL
                elif "maintenancerequests" in text:  # the hand-off to NVSentinel (corroboration.action nvsentinel)
                    if nvsentinel:
                        calls.append(call(verb, "nvsentinel.dgxc.nvidia.com", "maintenancerequests"))
                    continue
                elif "TRAINING_RUNTIME_PLURAL" in text:  # a TrainJob's runtime (kube.Kube.runtime_exists)
                    if "TrainJob" not in kinds:
                        continue
                    cluster = "CLUSTER_TRAINING_RUNTIME_PLURAL" in text
                    resource = c.CLUSTER_TRAINING_RUNTIME_PLURAL if cluster else c.TRAINING_RUNTIME_PLURAL
                    calls.append(call(verb, c.TRAINER_GROUP, resource, "" if cluster else JOB_NS, "x"))
                    continue
                else:  # the training job (kind.group/kind.plural, _job_args(...)): every enabled job kind
                    for kind in enabled:
                        calls.append(call(verb, kind.group, kind.plural, JOB_NS, "" if verb in ("list", "create") else "x"))
                    continue
            else:
                group = _GROUP_OF_API[owner.attr]
                kind = m["kind"]
                resource = _PLURAL.get(kind, kind + "s")
            name = "" if verb in ("list", "create") else "x"
            if resource == "configmaps":  # the breaker's and the fleet's nominations, in the release namespace
                if verb == "create":
                    calls.append(call(verb, group, resource, NAMESPACE))
                    continue
                for cm in (config.remediation.breaker_configmap, config.remediation.nominations_configmap):
                    calls.append(call(verb, group, resource, NAMESPACE, cm, sub))
                continue
            if resource == "secrets":  # only the operator's own, in the release namespace
                assert path.name == OWN_SECRETS, f"{path.name}: a Secret call outside {OWN_SECRETS}; teach this test"
                owned = [config.agent.key_secret]
                owned += [config.webhook.certs_secret] if tls_mode == "operator" else []
                calls += [call(verb, group, resource, NAMESPACE, "" if verb == "create" else n) for n in owned]
                continue
            if resource == "mutatingwebhookconfigurations":  # the chart's, by name (cluster-scoped)
                namespace, name = "", config.webhook.configuration_name
            if resource == "nodes":
                namespace = ""
            if resource == "leases":  # the leader election's Lease, in the release namespace, by name
                namespace = NAMESPACE
                name = "" if verb == "create" else config.operator.lease_name
            if resource == "jobs":  # the analyzer Jobs, in the analyzer's namespace (the release namespace)
                namespace = NAMESPACE
            calls.append(call(verb, group, resource, namespace, name, sub))
    return calls


def operator_calls(
    tls_mode: str = "helm", *, namespaced: bool = False, kinds: str = ALL_KINDS, nvsentinel: bool = False
) -> list[AuditEntry]:
    """The analyzer Job runs in the release namespace with the chart: never owned by an Incident there (an
    owner cannot live in another namespace), so no update on incidents/finalizers is needed."""
    calls = kopf_calls(namespaced=namespaced, kinds=kinds) + client_calls(tls_mode, kinds, nvsentinel=nvsentinel)
    assert any(e.resource == "incidents" and e.verb == "create" for e in calls), "derivation found no calls"
    return calls


def source_step_calls() -> list[AuditEntry]:
    """The source step's copy Job (analyzer.sourceFromImage), in the training job's namespace
    (``source_job.copy_job_ref``), through the same Job calls as the analyzer's (kube.Kube create_job,
    get_batch_job, delete_job; its pods through list_job_pods, already cluster-wide)."""
    from frwatch_operator.analysis.source_job import copy_job_ref
    from frwatch_operator.incident.record import IncidentIdentity

    ns, name = copy_job_ref(IncidentIdentity(JOB_NS, "llama-0", "uid"))
    assert ns == JOB_NS
    return [call("create", "batch", "jobs", ns), call("get", "batch", "jobs", ns, name),
            call("delete", "batch", "jobs", ns, name)]  # fmt: skip


def _coverage(values: dict[str, Any]) -> Coverage:
    tls_mode = values.get("webhook", {}).get("tls", {}).get("mode", "helm")
    namespaced = bool(values.get("operator", {}).get("namespaces"))
    kinds = ",".join(values.get("operator", {}).get("jobKinds", c.JOB_KINDS))
    nvsentinel = values.get("corroboration", {}).get("action") == "nvsentinel"
    calls = operator_calls(tls_mode, namespaced=namespaced, kinds=kinds, nvsentinel=nvsentinel)
    if values.get("analyzer", {}).get("sourceFromImage"):
        calls += source_step_calls()
    return check(calls, grants_for(render(values), SA, NAMESPACE))


def test_the_source_step_may_run_jobs_in_training_namespaces_only_when_it_is_on() -> None:
    """analyzer.sourceFromImage: the copy Job runs in the training job's namespace (the tenant's image never
    runs in the release namespace), so the operator gets Jobs there; off, Jobs only in the analyzer's."""
    on: dict[str, Any] = {"remediation": {"enabled": True, "dryRun": False}, "analyzer": {"sourceFromImage": True}}
    coverage = _coverage(on)
    assert coverage.exact, coverage.explain()
    off = check(source_step_calls(), grants_for(render({}), SA, NAMESPACE))
    assert sorted(e.verb for e in off.denied) == ["create", "delete", "get"], off.explain()


def test_rbac_with_cordoning_on_is_exactly_what_the_code_calls() -> None:
    coverage = _coverage({"remediation": {"enabled": True, "dryRun": False}})
    assert coverage.exact, coverage.explain()


def test_the_nvsentinel_hand_off_may_create_maintenance_requests_and_nothing_more() -> None:
    """corroboration.action nvsentinel (cordoning on): create on NVSentinel's cluster-scoped MaintenanceRequests,
    exactly; with the default action no grant on them at all."""
    coverage = _coverage({"remediation": {"enabled": True, "dryRun": False}, "corroboration": {"action": "nvsentinel"}})
    assert coverage.exact, coverage.explain()
    rules = [r for d in render({"remediation": {"enabled": True, "dryRun": False}}) if d.get("kind") == "ClusterRole"
             for r in d.get("rules") or []]  # fmt: skip
    assert not any("nvsentinel.dgxc.nvidia.com" in r.get("apiGroups", []) for r in rules)


def test_default_rbac_cannot_cordon_and_allows_everything_else() -> None:
    """Dry-run by default: the one call refused is the cordon itself (patch nodes)."""
    coverage = _coverage({})
    assert [(e.verb, e.resource) for e in coverage.denied] == [("patch", "nodes")], coverage.explain()
    assert not coverage.unused and not coverage.wildcards, coverage.explain()


def test_watched_namespaces_add_exactly_kopfs_namespace_scanning() -> None:
    """operator.namespaces set: the operator watches those (kopf patterns allowed) and may list/watch
    namespaces, which kopf needs to match them; unset (cluster-wide), no grant on namespaces at all."""
    values: dict[str, Any] = {"remediation": {"enabled": True, "dryRun": False}}
    watched = {**values, "operator": {"namespaces": ["team-a", "team-*"]}}
    coverage = _coverage(watched)
    assert coverage.exact, coverage.explain()
    (deployment,) = [d for d in render(watched) if d["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    config = load_config({"FRWATCH_OPERATOR_NAMESPACES": env["FRWATCH_OPERATOR_NAMESPACES"]})
    assert namespaces_of(config) == ["team-a", "team-*"]
    clusterwide = render(values)
    assert not any("namespaces" in r.get("resources", []) for d in clusterwide for r in d.get("rules") or [])
    assert "FRWATCH_OPERATOR_NAMESPACES" not in str(clusterwide)
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmError):
        chart.validate_schema({"operator": {"namespaces": "team-a,team-b"}})  # a list, not kopf's string


@pytest.mark.parametrize("kinds", [["PyTorchJob"], ["TrainJob"], ["JobSet"], ["TrainJob", "JobSet"]])
def test_rbac_covers_each_job_kind_only_when_it_is_enabled(kinds: list[str]) -> None:
    """Exactly the calls of the enabled kinds, and no grant on a kind that is not enabled."""
    values: dict[str, Any] = {"remediation": {"enabled": True, "dryRun": False}, "operator": {"jobKinds": kinds}}
    coverage = _coverage(values)
    assert coverage.exact, coverage.explain()
    groups = {g for d in render(values) for r in d.get("rules") or [] for g in r.get("apiGroups", [])}
    assert ("kubeflow.org" in groups) == ("PyTorchJob" in kinds)
    assert ("trainer.kubeflow.org" in groups) == ("TrainJob" in kinds)
    assert ("jobset.x-k8s.io" in groups) == ("JobSet" in kinds)


def test_the_derivation_sees_the_operators_calls() -> None:
    calls = {(e.verb, e.api_group, e.resource_path) for e in operator_calls()}
    assert {
        ("watch", "", "pods"),
        ("create", c.GROUP, "incidents"),
        ("patch", c.GROUP, "incidents/status"),
        ("patch", c.KF_GROUP, "pytorchjobs"),
        ("patch", c.TRAINER_GROUP, "trainjobs"),
        ("patch", c.JOBSET_GROUP, "jobsets"),
        ("get", c.TRAINER_GROUP, "clustertrainingruntimes"),
        ("watch", c.JOBSET_GROUP, "jobsets"),
        ("create", "batch", "jobs"),
        ("create", "", "events"),
        ("get", "", "pods/log"),  # evidence: the training containers' logs
        ("list", "", "events"),  # evidence: the Events naming each node of the attempt
        ("get", "", "nodes"),  # evidence and the cordon policy: a node's conditions and labels
    } <= calls


def test_rbac_in_operator_tls_mode_is_exactly_what_the_code_calls() -> None:
    coverage = _coverage(
        {"remediation": {"enabled": True, "dryRun": False}, "webhook": {"tls": {"mode": "operator"}}}
    )
    assert coverage.exact, coverage.explain()


def test_operator_tls_mode_adds_only_its_certificate_secret_and_webhook_configuration() -> None:
    def key(g: Any) -> tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        names = tuple(sorted(g.resource_names))
        return g.namespace or "*", tuple(sorted(g.resources)), tuple(sorted(g.verbs)), names

    default = {key(g) for g in grants_for(render(), SA, NAMESPACE)}
    operator = grants_for(render({"webhook": {"tls": {"mode": "operator"}}}), SA, NAMESPACE)
    extra = sorted(key(g) for g in operator if key(g) not in default)
    assert extra == [
        ("*", ("mutatingwebhookconfigurations",), ("get", "patch"), ("frwatch",)),
        # the rule naming the operator's own Secrets gains the certificate's
        (NAMESPACE, ("secrets",), ("get", "update"), ("frwatch-agent-key", "frwatch-webhook-certs")),
    ]
    calls = {(e.verb, e.resource, e.namespace, e.name) for e in client_calls("operator")}
    calls -= {(e.verb, e.resource, e.namespace, e.name) for e in client_calls()}
    assert calls == {
        ("get", "secrets", NAMESPACE, "frwatch-webhook-certs"),
        ("update", "secrets", NAMESPACE, "frwatch-webhook-certs"),
        ("get", "mutatingwebhookconfigurations", "", "frwatch"),
        ("patch", "mutatingwebhookconfigurations", "", "frwatch"),
    }


def test_the_only_secrets_the_operator_touches_are_its_own_in_its_namespace() -> None:
    """No Secret in any training namespace (the agents' tokens derive from the operator's key ring): every
    Secret grant is in the release namespace, by name, or create (which cannot be limited by name)."""
    for values in ({}, {"webhook": {"tls": {"mode": "operator"}}}):
        grants = [g for g in grants_for(render(values), SA, NAMESPACE) if "secrets" in g.resources]
        assert grants and all(g.namespace == NAMESPACE for g in grants), grants
        assert all(g.resource_names or g.verbs == {"create"} for g in grants), grants


# --- the checker itself, on hand-made audit logs ------------------------------------------------------------

RULES: list[dict[str, Any]] = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "op"},
     "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
               {"apiGroups": ["frwatch.io"], "resources": ["incidents/status"], "verbs": ["patch"]},
               {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["tok"], "verbs": ["get"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "op"},
     "roleRef": {"kind": "ClusterRole", "name": "op", "apiGroup": "rbac.authorization.k8s.io"},
     "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "sys"}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "op", "namespace": "sys"},
     "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "op", "namespace": "sys"},
     "roleRef": {"kind": "Role", "name": "op", "apiGroup": "rbac.authorization.k8s.io"},
     "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "sys"}]},
    # bound to someone else: must not count
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "other"},
     "roleRef": {"kind": "ClusterRole", "name": "op", "apiGroup": "rbac.authorization.k8s.io"},
     "subjects": [{"kind": "ServiceAccount", "name": "other", "namespace": "sys"}]},
]  # fmt: skip


def _log(*requests: tuple[str, str]) -> list[AuditEntry]:
    """(method, path?query) -> audit entries, classified as the proxy does."""
    out = []
    for method, url in requests:
        path, _, qs = url.partition("?")
        query = dict(p.split("=", 1) for p in qs.split("&") if p)
        out.append(audit_entry(method, path, query, {"authorization": "Bearer op", "user-agent": "t"}, 200))
    return out


def test_checker_accepts_a_log_the_rules_cover_exactly() -> None:
    log = _log(
        ("GET", "/api/v1/pods"),
        ("GET", "/api/v1/pods?watch=true"),
        ("PATCH", "/apis/frwatch.io/v1alpha1/namespaces/a/incidents/i1/status"),
        ("GET", "/api/v1/namespaces/b/secrets/tok"),
        ("GET", "/api/v1/namespaces/sys/configmaps/breaker"),
        ("GET", "/apis"),  # discovery: granted to everyone
        ("GET", "/version"),
    )
    coverage = check(log, grants_for(RULES, "op", "sys"))
    assert coverage.exact, coverage.explain()


@pytest.mark.parametrize(
    ("request_", "why"),
    [
        (("PATCH", "/apis/frwatch.io/v1alpha1/namespaces/a/incidents/i1"), "the object, not its status"),
        (("GET", "/api/v1/namespaces/b/secrets/other"), "a Secret outside resourceNames"),
        (("GET", "/api/v1/namespaces/b/configmaps/breaker"), "a Role applies in its own namespace only"),
        (("DELETE", "/api/v1/namespaces/a/pods"), "deletecollection was never granted"),
        (("GET", "/api/v1/namespaces/a/pods/p"), "get is not list"),
        (("POST", "/api/v1/namespaces/a/secrets"), "create cannot use resourceNames"),
    ],
)
def test_checker_reports_calls_the_rules_deny(request_: tuple[str, str], why: str) -> None:
    coverage = check(_log(request_), grants_for(RULES, "op", "sys"))
    assert len(coverage.denied) == 1, why


def test_checker_reports_grants_no_call_used_and_wildcards() -> None:
    coverage = check(_log(("GET", "/api/v1/pods")), grants_for(RULES, "op", "sys"))
    assert ("ClusterRole/op rule 0", "watch", "", "pods") in coverage.unused
    assert ("Role/op rule 0", "get", "", "configmaps") in coverage.unused
    wild = [*RULES[:1], {**RULES[1]}]
    wild[0] = {**RULES[0], "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    coverage = check(_log(("DELETE", "/api/v1/namespaces/a/pods/p")), grants_for(wild, "op", "sys"))
    assert not coverage.denied and coverage.wildcards == ["ClusterRole/op rule 0"]
    assert "WILDCARD" in coverage.explain()


def test_checker_refuses_a_binding_to_a_missing_role() -> None:
    with pytest.raises(ValueError, match="not in the manifests"):
        grants_for(RULES[1:2], "op", "sys")


def test_rendered_rules_have_no_wildcards_in_any_variant() -> None:
    for values in (
        {},
        {"remediation": {"enabled": True, "dryRun": False}},
        {"webhook": {"tls": {"mode": "operator"}}},
    ):
        for doc in render(values):
            for rule in doc.get("rules") or []:
                flat = rule.get("apiGroups", []) + rule.get("resources", []) + rule.get("verbs", [])
                assert "*" not in flat, (doc["metadata"]["name"], rule)


# --- the audit proxy, on real HTTP in front of the emulator ----------------------------------------------


def test_audit_proxy_records_each_call_in_rbac_terms(
    k8s_api: Any, k8s_namespace: str, tmp_path: Path
) -> None:
    from kubernetes import client
    from kubernetes import config as kube_config

    from frwatch_dev.localcluster.audit import start_audit_proxy

    with start_audit_proxy(k8s_api.url) as proxy:
        path = proxy.write_kubeconfig(tmp_path / "kubeconfig", user="frwatch-operator")
        api = kube_config.new_client_from_config(str(path))
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map(
            k8s_namespace, {"metadata": {"name": "breaker"}, "data": {"a": "1"}}
        )
        core.read_namespaced_config_map("breaker", k8s_namespace)
        core.patch_namespaced_config_map("breaker", k8s_namespace, {"data": {"a": "2"}})
        core.list_pod_for_all_namespaces()
        watched = core.list_namespaced_config_map(
            k8s_namespace, watch=True, timeout_seconds=1, _preload_content=False
        )
        assert b"breaker" in watched.read()
        core.delete_namespaced_config_map("breaker", k8s_namespace)
        api.close()
        entries = proxy.entries_for("frwatch-operator")
    got = [(e.verb, e.resource, e.namespace, e.name, e.status) for e in entries]
    assert got == [
        ("create", "configmaps", k8s_namespace, "", 201),
        ("get", "configmaps", k8s_namespace, "breaker", 200),
        ("patch", "configmaps", k8s_namespace, "breaker", 200),
        ("list", "pods", "", "", 200),
        ("watch", "configmaps", k8s_namespace, "", 200),
        ("delete", "configmaps", k8s_namespace, "breaker", 200),
    ]
    role = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "patch", "watch"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "r"},
             "roleRef": {"kind": "ClusterRole", "name": "r"},
             "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "sys"}]}]  # fmt: skip
    coverage = check(entries, grants_for(role, "op", "sys"))
    assert sorted((e.verb, e.resource) for e in coverage.denied) == [
        ("delete", "configmaps"),
        ("list", "pods"),
    ]
