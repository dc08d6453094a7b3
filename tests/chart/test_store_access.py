"""Issue 26: the store credentials, keys or keyless, as the chart renders them and as the operator then builds
the analyzer Job and the agent from its rendered environment.

With ``storeAccess.mode=identity`` (IRSA here) nothing anywhere names a static key: no Secret reference for the
operator, the analyzer Jobs or the agents, and the ServiceAccounts carry the role annotations where they run.
The default (``keys``) still wires the Secrets. And boto3, given no keys, takes the web identity IRSA injects
(its STS at AWS, not at the S3 endpoint)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
from chart_helpers import CHART, NAMESPACE, RELEASE, one, render

from frwatch_operator.analysis.analyzer_job import analyzer_job, effective_run
from frwatch_operator.capture.optin import defaults
from frwatch_operator.capture.sidecar import JobContext, agent_container
from frwatch_operator.config import load_config
from frwatch_operator.incident.record import IncidentIdentity

ROLE = "eks.amazonaws.com/role-arn"
OPERATOR_ROLE = "arn:aws:iam::111122223333:role/frwatch-operator"
ANALYZER_ROLE = "arn:aws:iam::111122223333:role/frwatch-analyzer"
IRSA = {
    "s3": {"bucket": "frwatch", "region": "eu-west-1"},
    "storeAccess": {
        "mode": "identity",
        "operatorServiceAccountAnnotations": {ROLE: OPERATOR_ROLE},
        "analyzerServiceAccountAnnotations": {ROLE: ANALYZER_ROLE},
    },
}
KEY_NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def _walk(node: Any, path: str = "") -> list[tuple[str, Any]]:
    out = [(path, node)]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _walk(v, f"{path}[{i}]")
    return out


def static_keys(obj: Any) -> list[str]:
    """Every place in ``obj`` that names a static key: a secretKeyRef or envFrom of a Secret, an env var of a
    key's name, a Secret holding one."""
    found = []
    for path, node in _walk(obj):
        if isinstance(node, dict):
            if "secretKeyRef" in node or "secretRef" in node:
                found.append(path)
            if node.get("name") in KEY_NAMES:
                found.append(f"{path} ({node['name']})")
            if node.get("kind") == "Secret" and set(node.get("data") or {}) & set(KEY_NAMES):
                found.append(f"{path} (Secret {node['metadata']['name']})")
    return found


def operator_env(docs: list[dict[str, Any]]) -> dict[str, str]:
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def built_by_the_operator(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The analyzer Job and the agent container the operator makes with the rendered configuration."""
    config = load_config(operator_env(docs))
    settings = defaults(config)
    incident = IncidentIdentity(namespace="team-a", name="llama-0", uid="uid-1")
    run = effective_run(config.analyzer)
    job = analyzer_job(incident, evidence_url="s3://frwatch/frwatch/team-a/llama/uid/0", s3=config.s3, run=run,
                       settings=config.analyzer)  # fmt: skip
    agent = agent_container(settings, config, JobContext("PyTorchJob", "llama", "uid", "0"), "token")
    return job, agent


def test_irsa_renders_no_static_key_anywhere_and_the_role_annotations_where_the_pods_run() -> None:
    docs = render(IRSA)
    assert static_keys(docs) == []
    operator_sa = one(docs, "ServiceAccount", f"{RELEASE}")
    assert operator_sa["metadata"]["annotations"] == {ROLE: OPERATOR_ROLE}
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == operator_sa["metadata"]["name"]
    analyzer_sa = one(docs, "ServiceAccount", "-analyzer")
    assert analyzer_sa["metadata"] == {**analyzer_sa["metadata"], "namespace": NAMESPACE,
                                        "annotations": {ROLE: ANALYZER_ROLE}}  # fmt: skip
    assert analyzer_sa["automountServiceAccountToken"] is False
    # no RBAC for the analyzer's identity: it carries only the store role
    subjects = [s for d in docs for s in d.get("subjects") or []]
    assert analyzer_sa["metadata"]["name"] not in {s["name"] for s in subjects}
    env = operator_env(docs)
    assert env["FRWATCH_S3_CREDENTIALS_SECRET"] == "" and env["FRWATCH_ANALYZER_SERVICE_ACCOUNT"] == analyzer_sa["metadata"]["name"]

    job, agent = built_by_the_operator(docs)
    pod = job["spec"]["template"]["spec"]
    assert static_keys(job) == [] and static_keys(agent) == []
    assert pod["serviceAccountName"] == analyzer_sa["metadata"]["name"]
    assert pod["automountServiceAccountToken"] is False  # IRSA projects its own token; no API token
    assert {e["name"] for e in pod["containers"][0]["env"]} == {"AWS_REGION"}  # no endpoint set: AWS's


def test_the_default_keys_mode_wires_each_partys_secret() -> None:
    docs = render({"s3": {"existingSecret": "frwatch-s3-operator", "endpointUrl": "http://minio.storage:9000"},
                   "analyzer": {"credentialsSecret": "frwatch-s3-analyzer"}})  # fmt: skip
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"] == [RELEASE]
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"] if "valueFrom" in e
            and "secretKeyRef" in e["valueFrom"]}  # fmt: skip
    assert refs == {"AWS_ACCESS_KEY_ID": "frwatch-s3-operator", "AWS_SECRET_ACCESS_KEY": "frwatch-s3-operator"}
    job, agent = built_by_the_operator(docs)
    job_refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
                if "valueFrom" in e}  # fmt: skip
    assert job_refs == {"frwatch-s3-analyzer"} and "serviceAccountName" not in job["spec"]["template"]["spec"]
    agent_refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in agent["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert agent_refs == {"frwatch-s3"}
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["AWS_ENDPOINT_URL_S3"] == "http://minio.storage:9000" and "AWS_ENDPOINT_URL" not in env


def test_the_analyzer_identity_goes_to_the_analyzer_namespace() -> None:
    docs = render({**IRSA, "analyzer": {"namespace": "frwatch-jobs"}})
    assert one(docs, "ServiceAccount", "-analyzer")["metadata"]["namespace"] == "frwatch-jobs"


@pytest.mark.parametrize("keys", [{"s3": {"existingSecret": "k"}}, {"analyzer": {"credentialsSecret": "k"}}])
def test_identity_mode_refuses_a_static_key_beside_it(keys: dict[str, Any]) -> None:
    values = json.loads(json.dumps(IRSA))
    for section, settings in keys.items():
        values[section] = {**values.get(section, {}), **settings}
    with helm.Chart.load(CHART) as chart, pytest.raises(Exception, match=r"storeAccess\.mode=identity uses no static keys"):
        chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)


def test_without_keys_boto3_takes_the_web_identity_irsa_injects_and_asks_sts_at_aws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the analyzer Job and the operator do with the environment IRSA gives them (no network: the
    credentials are resolved lazily, the endpoints are what boto3 would call)."""
    from frwatch_analyzers.store.sources import S3Config, s3_client
    from frwatch_operator.config import S3Settings
    from frwatch_operator.store.s3 import S3Store

    token = tmp_path / "token"
    token.write_text("a-projected-service-account-token")
    for name in (*KEY_NAMES, "AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ROLE_ARN", ANALYZER_ROLE)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://minio.storage:9000")  # what analyzer_env sets
    analyzer = s3_client(S3Config.from_env())
    operator = S3Store(S3Settings(region="eu-west-1"))._client
    for client in (analyzer, operator):
        credentials = client._request_signer._credentials
        assert credentials.method == "assume-role-with-web-identity"
    assert analyzer.meta.endpoint_url == "http://minio.storage:9000"
    import boto3

    sts = boto3.session.Session().client("sts").meta.endpoint_url
    assert sts.startswith("https://sts.") and sts.endswith(".amazonaws.com"), sts
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://minio.storage:9000")  # what the analyzer used to get
    assert boto3.session.Session().client("sts").meta.endpoint_url == "http://minio.storage:9000"


def _no_credentials_env(tmp_path: Path) -> dict[str, str]:
    """An environment in which boto3 finds no credentials at all (no keys, files, web identity or IMDS)."""
    import os

    keep = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**keep, "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9"}  # fmt: skip


def test_the_analyzer_without_credentials_names_the_setting_to_fix(tmp_path: Path) -> None:
    import subprocess
    import sys

    frwatch = Path(sys.executable).parent / "frwatch"
    out = subprocess.run([str(frwatch), "analyze", "s3://frwatch/frwatch/team-a/llama/uid/0"], capture_output=True,
                         text=True, timeout=120, env=_no_credentials_env(tmp_path))  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "Unable to locate credentials" not in out.stderr
    assert "no store credentials found" in out.stderr and "analyzer.credentialsSecret" in out.stderr, out.stderr


def test_the_operator_and_agent_without_credentials_name_the_setting_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from frwatch_operator.config import S3Settings
    from frwatch_operator.errors import FatalError
    from frwatch_operator.store.s3 import S3Store

    for name in [k for k in __import__("os").environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in _no_credentials_env(tmp_path).items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    store = S3Store(S3Settings(endpoint_url="http://127.0.0.1:9", max_attempts=1))
    with pytest.raises(FatalError) as caught:
        store.get("frwatch/x")
    text = str(caught.value)
    assert "no store credentials found" in text
    assert "s3.existingSecret" in text and "s3.agentCredentialsSecret" in text, text


def _notes(values: dict[str, Any]) -> str:
    with helm.Chart.load(CHART) as chart:
        out = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return next(text for path, text in out.items() if path.endswith("NOTES.txt"))


def test_notes_say_where_each_partys_credentials_come_from_and_name_every_job_kind() -> None:
    keys = _notes({})
    assert f"analyzer Jobs: Secret frwatch-s3 in {NAMESPACE} (create it there)" in keys
    assert "trainjob/NAME" in keys and "PyTorchJob, TrainJob, JobSet" in keys
    keyless = _notes(IRSA)
    assert f"{RELEASE}-analyzer in {NAMESPACE}" in keyless and "Secret" not in keyless


def test_each_analyzer_client_resolves_its_credentials_from_the_environment_it_starts_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """boto3's default session resolves credentials once for the process: a client made after the environment
    changed (web identity first, static keys later) must not carry the first one's (it asked STS at AWS)."""
    from frwatch_analyzers.store.sources import S3Config, s3_client

    token = tmp_path / "token"
    token.write_text("a-projected-service-account-token")
    for name in (*KEY_NAMES, "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ROLE_ARN", ANALYZER_ROLE)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    first = s3_client(S3Config.from_env())
    assert first._request_signer._credentials.method == "assume-role-with-web-identity"
    monkeypatch.delenv("AWS_ROLE_ARN")
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    later = s3_client(S3Config.from_env())
    assert later._request_signer._credentials.method == "env"
