"""``frwatch operator``: the kopf operator (detection, collection) and its admission webhook, in one process.

Configuration is the environment (``frwatch_operator.config``), loaded once here. It watches the whole
cluster, or the namespaces in ``FRWATCH_OPERATOR_NAMESPACES`` (comma-separated). The webhook is served by
kopf (``settings.admission.server``): TLS from ``FRWATCH_WEBHOOK_CERT_FILE``/``FRWATCH_WEBHOOK_KEY_FILE``
(unset: kopf self-signs), or plain HTTP with ``FRWATCH_WEBHOOK_INSECURE=true`` (tests and local runs), or,
with ``FRWATCH_WEBHOOK_MANAGE_CERTS=true`` (tls.mode=operator), from the operator's own CA and certificate
(``frwatch_operator.store.webhook_cert_secret``: Secret, caBundle and served file set up before serving). The
agents' key ring (``frwatch_operator.store.agent_key_ring``: the Secret ``FRWATCH_AGENT_KEY_SECRET`` in
``FRWATCH_AGENT_KEY_NAMESPACE``) is read or made before serving too; the agents' tokens derive from it.
Logs are JSON lines on stderr. Exit codes: 0 after a clean stop (SIGTERM/SIGINT), 2 on a bad configuration
(or a metrics port already taken).
Probes and metrics (``FRWATCH_OPERATOR_LISTEN_ADDR``, default all interfaces): kopf's liveness endpoint
``GET /healthz`` on ``FRWATCH_OPERATOR_HEALTH_PORT`` (8080) and the Prometheus metrics of
``frwatch_operator.metrics`` (``GET /metrics``) on ``FRWATCH_OPERATOR_METRICS_PORT`` (9090); 0 turns either off.

kopf settings: handler progress and diff-bases in annotations under ``frwatch.io`` (never in status);
finalizers only where a handler needs one (the Incident timer: kopf drops it once the Incident is handed
over); kopf posts its own Events only at WARNING and above; standalone (no kopf peering: it would pause
every watch of all but one replica, see ``frwatch_operator.leader_election``).

Replicas: with ``FRWATCH_OPERATOR_LEADER_ELECTION=true`` (the chart's default) the replicas elect a leader
over a Lease; every replica watches and serves the webhook, only the leader drives Incidents. A clean stop
releases the Lease.
"""

from __future__ import annotations

import logging
import os
import sys

from frwatch_operator import constants as c
from frwatch_operator.cli import parser_for
from frwatch_operator.config import Config, load_config
from frwatch_operator.errors import FatalError
from frwatch_operator.leader_election import Alone, LeaderElector, LeaseApi
from frwatch_operator.live.shards import identity_of
from frwatch_operator.logsetup import setup_logging

logger = logging.getLogger("frwatch.operator")


def namespaces_of(config: Config) -> list[str]:
    """The namespaces to watch; [] means the whole cluster."""
    return [n.strip() for n in config.operator.namespaces.split(",") if n.strip()]


def kopf_settings(config: Config) -> object:
    """kopf's settings for frwatch (see the module docstring)."""
    import kopf

    from frwatch_operator.webhook import webhook_server

    settings = kopf.OperatorSettings()
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.KOPF_PERSISTENCE_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=c.KOPF_PERSISTENCE_PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{c.PREFIX}incident-driver"
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.admission.server = webhook_server(config)
    settings.admission.managed = None  # the chart registers the MutatingWebhookConfiguration
    return settings


def liveness_endpoint(config: Config) -> str | None:
    """kopf's liveness URL (``None``: off)."""
    o = config.operator
    return f"http://{o.listen_addr}:{o.health_port}/healthz" if o.health_port else None


def run(config: Config) -> None:
    """Build the operator from ``config`` and run it until SIGTERM/SIGINT."""
    import kopf
    from kubernetes import client
    from kubernetes import config as kube_config

    from frwatch_operator.detect.observations import Observations
    from frwatch_operator.handlers import Deps, register_all
    from frwatch_operator.kinds.job_kind import enabled_kinds
    from frwatch_operator.kube.adapter import Kube
    from frwatch_operator.metrics import Metrics, serve
    from frwatch_operator.store.s3 import S3Store
    from frwatch_operator.webhook import JobIndex

    try:
        kube_config.load_incluster_config()
    except kube_config.ConfigException:
        kube_config.load_kube_config()
    if config.webhook.manage_certs:  # tls.mode=operator: the CA, certificate and caBundle before serving
        from frwatch_operator.store.webhook_cert_secret import start_webhook_tls

        config, _cert_keeper = start_webhook_tls(config, client.ApiClient())
    # the agents' key ring before serving: every pod admitted from now on gets its agent's token
    from frwatch_operator.store.agent_key_ring import start_agent_keys

    agent_keys, _key_keeper = start_agent_keys(config.agent, client.ApiClient())
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(kopf.login_via_client)
    metrics = Metrics()
    kube = Kube(client.ApiClient())
    elector = elector_of(config, kube)
    deps = Deps(config, JobIndex(), Observations(), kube, S3Store(config.s3), metrics, agent_keys,
                elector or Alone())  # fmt: skip
    register_all(registry, deps)
    for kind in enabled_kinds(config.operator.job_kinds):  # kopf watches a kind once its CRD appears
        if kube.served(kind) is False:
            logger.warning("%s (%s/%s %s) is not installed in this cluster: frwatch follows %ss once their CRD "
                           "is", kind.kind, kind.group, kind.version, kind.plural, kind.kind)  # fmt: skip
    logger.info("job kinds followed: %s", config.operator.job_kinds)
    try:
        serve(metrics, config.operator.metrics_port, addr=config.operator.listen_addr)
    except OSError as exc:
        raise FatalError(
            f"cannot serve the metrics on {config.operator.listen_addr}:{config.operator.metrics_port}: {exc}; "
            "set FRWATCH_OPERATOR_METRICS_PORT to a free port (0: no metrics)"
        ) from exc
    namespaces = namespaces_of(config)
    logger.info("frwatch operator starting: %s", ", ".join(namespaces) or "cluster-wide")
    if elector is not None:
        elector.start()
    try:
        kopf.run(
            registry=registry,
            settings=kopf_settings(config),  # type: ignore[arg-type]
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            liveness_endpoint=liveness_endpoint(config),
        )
    finally:
        if elector is not None:
            elector.stop()  # releases the Lease: another replica drives at once


def elector_of(config: Config, kube: LeaseApi) -> LeaderElector | None:
    """The leader election of this replica, when ``operator.leader_election`` is on."""
    o = config.operator
    if not o.leader_election:
        return None
    try:
        return LeaderElector(
            kube,
            identity=identity_of(o),
            namespace=o.lease_namespace, name=o.lease_name, lease_seconds=o.lease_seconds,
            renew_seconds=o.renew_seconds, retry_seconds=o.retry_seconds,
        )  # fmt: skip
    except ValueError as exc:
        raise FatalError(f"FRWATCH_OPERATOR_*_SECONDS: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("frwatch operator", __doc__)
    parser.parse_args(argv)
    try:
        config = load_config(os.environ)
    except FatalError as exc:
        print(f"frwatch operator: {exc}", file=sys.stderr)
        return 2
    setup_logging(config.log_level)
    try:
        run(config)
    except FatalError as exc:
        print(f"frwatch operator: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
