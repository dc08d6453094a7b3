"""The Helm chart, offline: it lints and renders with default and non-default values, every rendered
manifest validates against the Kubernetes 1.32 schemas, values.schema.json refuses bad values, the
webhook cannot block pods, the operator runs locked down, and its env is a valid frwatch Config."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
from chart_helpers import CHART, KUBE_VERSION, NAMESPACE, one, render

from frwatch_operator import constants as c
from frwatch_operator.config import env_names, load_config
from frwatch_operator.kinds.job_kind import enabled_kinds, pod_labels
from frwatch_operator.webhook import HANDLER_ID

#: Value sets that turn on every optional branch of the templates.
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cert-manager, own issuer": {
        "webhook": {
            "tls": {
                "mode": "certManager",
                "certManager": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}},
            }
        }
    },
    "cert-manager, self-signed": {"webhook": {"tls": {"mode": "certManager"}}},
    "operator-managed TLS": {"webhook": {"tls": {"mode": "operator"}}},
    "HA + monitoring": {
        "replicaCount": 2,
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
    },
    "live shards": {"replicaCount": 3, "liveWatch": {"shards": 4}},
    "live shards, no leader election": {"liveWatch": {"shards": 2}, "operator": {"leaderElection": {"enabled": False}}},
    "remediation on": {"remediation": {"enabled": True, "dryRun": False, "maxNodesPerIncident": 1}},
    "no metrics": {"metrics": {"enabled": False}},
    "keyless store access (IRSA)": {
        "storeAccess": {
            "mode": "identity",
            "operatorServiceAccountAnnotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/frwatch"},
            "analyzerServiceAccountAnnotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/analyzer"},
        },
        "flightRecorder": {"torchVersion": "2.5"},
    },
    "s3 secret, digest, custom everything": {
        "image": {"repository": "registry.example/frwatch", "digest": "sha256:" + "a" * 64},
        "imagePullSecrets": [{"name": "regcred"}],
        "s3": {
            "endpointUrl": "http://minio.storage:9000",
            "existingSecret": "frwatch-s3-creds",
            "bucket": "dumps",
        },
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/frwatch"}},
        "webhook": {"namespaceLabels": {"frwatch.io/capture": "enabled"}, "excludeNamespaces": ["infra"]},
        "operator": {
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "extraEnv": [{"name": "TZ", "value": "UTC"}],
            "priorityClassName": "system-cluster-critical",
        },
        "analyzer": {
            "image": "registry.example/frwatch-analyzer:1",
            "resources": {"limits": {"memory": "16Gi"}},
        },
        "logLevel": "DEBUG",
    },
    "private registry, pull secrets, network policy": {
        "image": {"registry": "mirror.example:5000"},
        "imagePullSecrets": [{"name": "regcred"}],
        "analyzer": {"imagePullSecrets": [{"name": "analyzer-pull"}]},
        "networkPolicy": {"enabled": True, "apiServerCIDRs": ["10.0.0.1/32"], "s3CIDRs": ["10.1.0.0/16"],
                          "webhookFrom": [{"ipBlock": {"cidr": "10.0.0.0/24"}}]},
    },
}
#: Kinds that are not built in: validated by shape here (their CRDs belong to cert-manager and prometheus-operator).
FOREIGN_KINDS = {"Certificate", "Issuer", "ServiceMonitor"}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_chart_lints_clean(variant: str) -> None:
    report = helm.lint(
        CHART, VARIANTS[variant], namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}", strict=True
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not report["errors"] and not problems, report


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_manifest_validates_against_kubernetes_schemas(variant: str) -> None:
    docs = render(VARIANTS[variant])
    assert docs
    for doc in docs:
        if doc["kind"] in FOREIGN_KINDS:
            assert doc["apiVersion"] in ("cert-manager.io/v1", "monitoring.coreos.com/v1")
            assert doc["metadata"]["namespace"] == NAMESPACE and doc["spec"]
            continue
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_validation_catches_a_broken_manifest() -> None:
    """The validator the test above relies on does refuse a bad Deployment (the test can fail)."""
    deployment = one(render(), "Deployment")
    deployment["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSION, strict=True)


def test_default_render_has_the_expected_objects() -> None:
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in render())
    assert kinds == sorted(
        [
            "ClusterRole/frwatch",
            "ClusterRoleBinding/frwatch",
            "Deployment/frwatch",
            "MutatingWebhookConfiguration/frwatch",
            "PodDisruptionBudget/frwatch",
            "Role/frwatch",
            "Role/frwatch-analyzer",
            "RoleBinding/frwatch",
            "RoleBinding/frwatch-analyzer",
            "Secret/frwatch-webhook-tls",
            "Service/frwatch-metrics",
            "Service/frwatch-webhook",
            "ServiceAccount/frwatch",
        ]
    )


def test_pdb_and_service_monitor_only_when_asked() -> None:
    kinds = {d["kind"] for d in render({"replicaCount": 1})}
    assert "PodDisruptionBudget" not in kinds and "ServiceMonitor" not in kinds
    ha = render(VARIANTS["HA + monitoring"])
    assert one(ha, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    monitor = one(ha, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_replicas_serve_the_webhook_and_one_elected_replica_drives_incidents() -> None:
    docs = render()
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}
    }  # fmt: skip
    pod = deployment["spec"]["template"]["spec"]
    spread = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert spread["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    env = _env(docs)
    assert env["FRWATCH_OPERATOR_LEADER_ELECTION"] == "true"
    assert env["FRWATCH_OPERATOR_IDENTITY"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert (env["FRWATCH_OPERATOR_LEASE_NAMESPACE"], env["FRWATCH_OPERATOR_LEASE_NAME"]) == (NAMESPACE, "frwatch-leader")
    config = load_config({k: v for k, v in env.items() if isinstance(v, str) and k in env_names()})
    o = config.operator
    assert o.leader_election and o.retry_seconds < o.renew_seconds < o.lease_seconds
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "frwatch")
    leases = [r for r in role["rules"] if r["resources"] == ["leases"]]
    assert {(tuple(r.get("resourceNames", [])), tuple(r["verbs"])) for r in leases} == {
        (("frwatch-leader",), ("get", "update")), ((), ("create",))
    }
    service = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "frwatch-webhook")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]  # every replica serves
    single = render({"replicaCount": 1, "operator": {"leaderElection": {"enabled": False}}})
    assert one(single, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert "FRWATCH_OPERATOR_LEADER_ELECTION" not in _env(single)
    assert "affinity" not in one(single, "Deployment")["spec"]["template"]["spec"]


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def test_operator_pod_is_locked_down() -> None:
    docs = render()
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    ctr = _container(docs)
    sc = ctr["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert ctr["resources"]["requests"] and ctr["resources"]["limits"]["memory"]
    assert ctr["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert ctr["readinessProbe"]["tcpSocket"] == {"port": "webhook"}
    assert ctr["args"] == ["operator"]
    assert {m["mountPath"] for m in ctr["volumeMounts"]} >= {"/tmp"}


def _env(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in _container(docs)["env"]}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_operator_env_is_a_valid_frwatch_config(variant: str) -> None:
    env = _env(render(VARIANTS[variant]))
    known = set(env_names())
    ours = {k for k in env if k.startswith("FRWATCH_")}
    assert ours <= known, f"the chart sets variables frwatch never reads: {ours - known}"
    literal = {k: v for k, v in env.items() if isinstance(v, str) and k in known}
    config = load_config(literal)  # raises FatalError naming the variable when a value is malformed
    assert config.webhook.host == f"frwatch-webhook.{NAMESPACE}.svc"
    assert config.remediation.breaker_namespace == NAMESPACE
    values = VARIANTS[variant]
    assert config.operator.health_port == values.get("operator", {}).get("healthPort", 8080)
    metrics = values.get("metrics", {})
    assert config.operator.metrics_port == (metrics.get("port", 9090) if metrics.get("enabled", True) else 0)


def test_safe_defaults_remediation_off_and_dry_run() -> None:
    env = _env(render())
    config = load_config({k: v for k, v in env.items() if isinstance(v, str) and k in env_names()})
    assert config.remediation.enabled is False
    assert config.remediation.dry_run is True
    assert config.analyzer.image == config.agent.image == "ghcr.io/frwatch/frwatch:0.1.0"
    assert config.analyzer.deadline_seconds == 900
    assert config.analyzer.resources.limits == {"memory": "4Gi"}
    on = _env(render(VARIANTS["remediation on"]))
    assert on["FRWATCH_REMEDIATION_ENABLED"] == "true" and on["FRWATCH_REMEDIATION_DRY_RUN"] == "false"


def test_s3_credentials_come_from_the_existing_secret() -> None:
    assert "AWS_ACCESS_KEY_ID" not in _env(render())
    env = _env(render(VARIANTS["s3 secret, digest, custom everything"]))
    assert env["AWS_ACCESS_KEY_ID"] == {
        "secretKeyRef": {"name": "frwatch-s3-creds", "key": "AWS_ACCESS_KEY_ID"}
    }
    assert env["AWS_SECRET_ACCESS_KEY"] == {
        "secretKeyRef": {"name": "frwatch-s3-creds", "key": "AWS_SECRET_ACCESS_KEY"}
    }
    assert env["FRWATCH_S3_ENDPOINT_URL"] == "http://minio.storage:9000"
    assert env["FRWATCH_ANALYZER_IMAGE"] == "registry.example/frwatch-analyzer:1"
    assert env["FRWATCH_AGENT_IMAGE"] == "registry.example/frwatch@sha256:" + "a" * 64


def _webhooks(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The configuration's webhook entries: one per job label of the enabled kinds, the same otherwise."""
    hooks: list[dict[str, Any]] = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hooks and all(h["clientConfig"] == hooks[0]["clientConfig"] for h in hooks)
    return hooks


def _webhook(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return _webhooks(docs)[0]


@pytest.mark.parametrize(
    "kinds", [["PyTorchJob", "TrainJob", "JobSet"], ["PyTorchJob"], ["TrainJob"], ["JobSet", "TrainJob"]]
)
def test_webhook_selects_the_pods_of_the_enabled_kinds_only(kinds: list[str]) -> None:
    """One entry per pod label the operator's own code watches for those kinds (jobkinds.pod_labels)."""
    docs = render({"operator": {"jobKinds": kinds}})
    selected = [h["objectSelector"]["matchExpressions"] for h in _webhooks(docs)]
    assert selected == [[{"key": label, "operator": "Exists"}] for label in pod_labels(enabled_kinds(",".join(kinds)))]
    assert len({h["name"] for h in _webhooks(docs)}) == len(selected)
    assert _env(docs)["FRWATCH_OPERATOR_JOB_KINDS"] == ",".join(kinds)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_webhook_can_never_block_a_pod(variant: str) -> None:
    for hook in _webhooks(render(VARIANTS[variant])):
        _never_blocks(hook)
    labels = [h["objectSelector"]["matchExpressions"][0]["key"] for h in _webhooks(render(VARIANTS[variant]))]
    assert labels == [c.KF_LABEL_JOB_NAME, c.LABEL_JOBSET_NAME]


def _never_blocks(hook: dict[str, Any]) -> None:
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None"
    assert hook["reinvocationPolicy"] == "Never"
    assert 1 <= hook["timeoutSeconds"] <= 10
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "operations": ["CREATE"],
            "scope": "Namespaced",
        }
    ]
    excluded = hook["namespaceSelector"]["matchExpressions"][0]
    assert excluded["operator"] == "NotIn" and {"kube-system", NAMESPACE} <= set(excluded["values"])
    assert hook["clientConfig"]["service"] == {
        "name": "frwatch-webhook", "namespace": NAMESPACE, "path": f"/{HANDLER_ID}", "port": 443
    }  # fmt: skip


def test_webhook_service_reaches_the_operator_port() -> None:
    docs = render()
    svc = one(docs, "Service", "-webhook")
    assert svc["spec"]["ports"] == [
        {"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}
    ]
    ports = {p["name"]: p["containerPort"] for p in _container(docs)["ports"]}
    assert ports["webhook"] == int(_env(docs)["FRWATCH_WEBHOOK_PORT"])
    deployment = one(docs, "Deployment")
    assert svc["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_helm_tls_mode_ca_bundle_signs_the_serving_certificate(tmp_path: Path) -> None:
    docs = render()
    secret = one(docs, "Secret", "-webhook-tls")
    bundle = _webhook(docs)["clientConfig"]["caBundle"]
    assert bundle == secret["data"]["ca.crt"]
    (tmp_path / "ca.pem").write_bytes(base64.b64decode(bundle))
    (tmp_path / "tls.pem").write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
    verify = subprocess.run(
        ["openssl", "verify", "-CAfile", str(tmp_path / "ca.pem"), str(tmp_path / "tls.pem")],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    text = subprocess.run(
        ["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", str(tmp_path / "tls.pem")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"DNS:frwatch-webhook.{NAMESPACE}.svc" in text
    pod = one(docs, "Deployment")["spec"]["template"]
    assert pod["metadata"]["annotations"]["checksum/webhook-ca"]
    assert {"name": "webhook-tls", "secret": {"secretName": "frwatch-webhook-tls"}} in pod["spec"]["volumes"]


def test_cert_manager_mode_injects_the_ca() -> None:
    docs = render(VARIANTS["cert-manager, self-signed"])
    mwc = one(docs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/frwatch-webhook"
    assert "caBundle" not in _webhook(docs)["clientConfig"]
    cert = one(docs, "Certificate")
    assert cert["spec"]["secretName"] == "frwatch-webhook-tls"
    assert f"frwatch-webhook.{NAMESPACE}.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["issuerRef"]["name"] == one(docs, "Issuer")["metadata"]["name"]
    assert not [d for d in docs if d["kind"] == "Secret"]
    own = render(VARIANTS["cert-manager, own issuer"])
    assert one(own, "Certificate")["spec"]["issuerRef"] == {"name": "ca", "kind": "ClusterIssuer"}
    assert not [d for d in own if d["kind"] == "Issuer"]


def test_operator_tls_mode_names_what_the_operator_makes_and_may_touch() -> None:
    """tls.mode=operator: no certificate rendered; the operator's config names the chart's Service, its
    MutatingWebhookConfiguration, the Secret the Role lets it keep, and the in-memory emptyDir it serves
    from; the RBAC reaches that Secret and that configuration only."""
    docs = render(VARIANTS["operator-managed TLS"])
    env = _env(docs)
    assert "FRWATCH_WEBHOOK_CERT_FILE" not in env and "caBundle" not in _webhook(docs)["clientConfig"]
    assert not [d for d in docs if d["kind"] in ("Secret", "Certificate")]
    w = load_config({k: v for k, v in env.items() if isinstance(v, str) and k in env_names()}).webhook
    assert w.manage_certs
    assert (w.ca_validity_days, w.cert_validity_days, w.cert_renew_before_days) == (3650, 365, 30)
    assert w.service_name == one(docs, "Service", "-webhook")["metadata"]["name"]
    assert w.namespace == NAMESPACE
    assert w.configuration_name == one(docs, "MutatingWebhookConfiguration")["metadata"]["name"]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    mount = next(m for m in _container(docs)["volumeMounts"] if m["mountPath"] == w.certs_dir)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["emptyDir"]["medium"] == "Memory" and "readOnly" not in mount
    role = one(docs, "ClusterRole", "-webhook-ca")
    assert role["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations"],
            "resourceNames": [w.configuration_name],
            "verbs": ["get", "patch"],
        }
    ]
    agent = load_config({k: v for k, v in env.items() if isinstance(v, str) and k in env_names()}).agent
    secrets = [r for r in one(docs, "Role", "frwatch")["rules"] if r["resources"] == ["secrets"]]
    assert secrets == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [agent.key_secret, w.certs_secret],
         "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},  # create cannot name the object
    ]  # fmt: skip
    default = [r for r in one(render(), "Role", "frwatch")["rules"] if r["resources"] == ["secrets"]]
    assert [r.get("resourceNames") for r in default] == [[agent.key_secret], None]  # the key ring only


@pytest.mark.parametrize(
    ("lifetimes", "says"),
    [
        ({"caValidityDays": 395}, "caValidityDays must exceed"),
        ({"renewBeforeDays": 365}, "renewBeforeDays must be below certValidityDays"),
    ],
)
def test_operator_tls_lifetimes_that_would_rotate_forever_fail_the_install(
    lifetimes: dict[str, int], says: str
) -> None:
    with pytest.raises(Exception, match=says):
        render({"webhook": {"tls": {"mode": "operator", "operator": lifetimes}}})


# --- values.schema.json -----------------------------------------------------------------------------------

BAD_VALUES = {
    "unknown top-level key": {"replicas": 2},
    "typo in a nested key": {"remediation": {"dryrun": False}},
    "remediation switch as a string": {"remediation": {"enabled": "yes"}},
    "zero replicas": {"replicaCount": 0},
    "unknown TLS mode": {"webhook": {"tls": {"mode": "self"}}},
    "webhook timeout above 10 s": {"webhook": {"timeoutSeconds": 30}},
    "bad cpu quantity": {"analyzer": {"resources": {"requests": {"cpu": "lots"}}}},
    "port out of range": {"metrics": {"port": 70000}},
    "bad digest": {"image": {"digest": "latest"}},
    "breaker share above 1": {"remediation": {"breakerShare": 1.5}},
    "bad log level": {"logLevel": "LOUD"},
    "bucket too short": {"s3": {"bucket": "ab"}},
    "endpoint without scheme": {"s3": {"endpointUrl": "minio:9000"}},
    "issuer kind": {"webhook": {"tls": {"certManager": {"issuerRef": {"name": "x", "kind": "Vault"}}}}},
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_values_schema_refuses_bad_values(case: str) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmError):
        chart.validate_schema(BAD_VALUES[case])
    report = helm.lint(CHART, BAD_VALUES[case])
    assert report["errors"], f"lint accepted {case}"


def test_values_schema_documents_every_key() -> None:
    with helm.Chart.load(CHART) as chart:
        schema = chart.schema
        defaults = chart.values
    assert schema is not None

    def walk(node: dict[str, Any], value: Any, path: str) -> None:
        assert node.get("description") or not path, f"{path}: no description in values.schema.json"
        if node.get("type") == "object" and "properties" in node and value != {}:  # {}: an optional object
            assert node.get("additionalProperties") is False, f"{path}: unknown keys must be refused"
            assert set(value) == set(node["properties"]), f"{path}: values.yaml and the schema differ"
            for key, child in node["properties"].items():
                walk(child, value[key], f"{path}.{key}")

    walk(schema, defaults, "")


def test_private_registry_and_pull_secrets_reach_the_agent_and_the_analyzer() -> None:
    """image.registry moves every frwatch image (operator, agent, analyzer); the pull Secrets reach the
    config fields the webhook (agent) and the analyzer Job read: their own list, else imagePullSecrets."""
    docs = render(VARIANTS["private registry, pull secrets, network policy"])
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "mirror.example:5000/frwatch/frwatch:0.1.0"
    assert deployment["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    env = _env(docs)
    config = load_config({k: v for k, v in env.items() if isinstance(v, str) and k in env_names()})
    assert config.agent.image == config.analyzer.image == "mirror.example:5000/frwatch/frwatch:0.1.0"
    assert config.agent.pull_secrets == ["regcred"]
    assert config.analyzer.pull_secrets == ["analyzer-pull"]
    defaults = load_config({k: v for k, v in _env(render()).items() if isinstance(v, str) and k in env_names()})
    assert defaults.agent.pull_secrets == defaults.analyzer.pull_secrets == []
    explicit = _env(render({"image": {"registry": "mirror.example"}, "agent": {"image": "localhost/own/agent:2"}}))
    assert explicit["FRWATCH_AGENT_IMAGE"] == "mirror.example/own/agent:2"


def test_network_policy_only_when_asked_and_it_lets_the_operator_work() -> None:
    assert not [d for d in render() if d["kind"] == "NetworkPolicy"]
    policy = one(render(VARIANTS["private registry, pull secrets, network policy"]), "NetworkPolicy")
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["podSelector"]["matchLabels"] == one(render(), "Deployment")["spec"]["selector"]["matchLabels"]
    ingress = {rule["ports"][0]["port"]: rule.get("from") for rule in spec["ingress"]}
    assert ingress == {9443: [{"ipBlock": {"cidr": "10.0.0.0/24"}}], 8080: None, 9090: None}
    egress = [([p["port"] for p in rule["ports"]], rule.get("to")) for rule in spec["egress"]]
    assert ([53, 53], None) in egress
    assert ([443, 6443], [{"ipBlock": {"cidr": "10.0.0.1/32"}}]) in egress
    assert ([443, 80], [{"ipBlock": {"cidr": "10.1.0.0/16"}}]) in egress
    agents = next(to for ports, to in egress if ports == [8089])
    assert agents == [{"namespaceSelector": {}, "podSelector": {"matchExpressions": [
        {"key": label, "operator": "Exists"}]}} for label in (c.KF_LABEL_JOB_NAME, c.LABEL_JOBSET_NAME)]


def test_live_shards_get_their_leases_by_name_and_reach_the_config() -> None:
    """liveWatch.shards: the operator's config has the shards, their Leases' prefix and the replica count, and
    the Role grants get/update on exactly those Leases (create: any name, as for the leader's)."""
    docs = render({"replicaCount": 3, "liveWatch": {"shards": 4}})
    env = _env(docs)
    o = load_config({k: v for k, v in env.items() if isinstance(v, str) and k in env_names()}).operator
    assert (o.live_shards, o.replicas, o.live_lease_prefix, o.lease_namespace) == (4, 3, "frwatch-live", NAMESPACE)
    leases = [r for d in docs if d["kind"] == "Role" for r in d["rules"] if "leases" in r["resources"]]
    named = sorted(n for r in leases if r["verbs"] == ["get", "update"] for n in r.get("resourceNames", []))
    assert named == ["frwatch-leader", *(f"frwatch-live-{i}" for i in range(4))]
    assert [r["verbs"] for r in leases if "resourceNames" not in r] == [["create"]]
    default = _env(render())
    assert default["FRWATCH_OPERATOR_LIVE_SHARDS"] == "1"  # the leader runs every job, as before
