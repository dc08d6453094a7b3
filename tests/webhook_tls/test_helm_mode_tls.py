"""tls.mode=helm still works end to end: the certificate Helm generates, mounted as the chart mounts it and
served as the operator serves FRWATCH_WEBHOOK_CERT_FILE/KEY_FILE, answers a real HTTPS AdmissionReview
verified against the rendered caBundle with the Service's DNS name as SNI."""

from __future__ import annotations

import base64
from pathlib import Path

from tls_helpers import https_admit, job, pod, render_chart

from frwatch_dev.ports import free_port
from frwatch_dev.testing.admission import patched, review
from frwatch_dev.testing.webhook_thread import WebhookThread
from frwatch_operator import constants as c
from frwatch_operator.config import Config, WebhookSettings
from frwatch_operator.webhook import JobIndex

NS = "frwatch-system"


def test_the_helm_generated_certificate_serves_https_the_rendered_ca_bundle_trusts(tmp_path: Path) -> None:
    docs = render_chart({}, NS)
    [secret] = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"].endswith("-webhook-tls")]
    [mwc] = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    bundle = mwc["webhooks"][0]["clientConfig"]["caBundle"]
    service = mwc["webhooks"][0]["clientConfig"]["service"]
    for key in ("tls.crt", "tls.key"):  # the Secret volume, as mounted at /var/run/frwatch/webhook-tls
        (tmp_path / key).write_bytes(base64.b64decode(secret["data"][key]))
    settings = WebhookSettings(addr="127.0.0.1", port=free_port(), cert_file=str(tmp_path / "tls.crt"),
                               key_file=str(tmp_path / "tls.key"))  # fmt: skip
    index = JobIndex()
    index.upsert_job(job("team"))
    with WebhookThread(index, Config(webhook=settings)) as server:
        assert server.url.startswith("https://")
        obj = pod("team")
        answer = https_admit(settings.port, bundle, f"{service['name']}.{NS}.svc", review(obj, "team"))
    assert c.ANN_INJECTED in patched(obj, answer)["metadata"]["annotations"]
