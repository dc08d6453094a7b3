"""The chart's alert rules and notification settings (issue 29): rendered as Helm would, each rule's PromQL
parsed (promql-parser: promtool is not on the package index), each metric a rule reads one the operator
exposes, and the notification URL taken from a Secret, never written into the chart."""

from __future__ import annotations

import re
from typing import Any

import promql_parser
import pytest
from chart_helpers import render

from frwatch_operator.config import env_names, load_config
from frwatch_operator.metrics import DOCS

ON = {"alerts": {"prometheusRule": {"enabled": True, "labels": {"release": "prom"}}}}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def _rule(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [rule] = [d for d in docs if d["kind"] == "PrometheusRule"]
    return rule


def _exposed() -> set[str]:
    return {name + suffix for name, (kind, _, _) in DOCS.items() for suffix in SUFFIXES[kind]}


def test_the_rule_is_off_by_default_and_without_metrics() -> None:
    assert not [d for d in render() if d["kind"] == "PrometheusRule"]
    assert not [d for d in render({**ON, "metrics": {"enabled": False}}) if d["kind"] == "PrometheusRule"]


def test_every_alert_parses_reads_exposed_metrics_and_says_what_to_do() -> None:
    rule = _rule(render(ON))
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["metadata"]["labels"]["release"] == "prom"
    groups = rule["spec"]["groups"]
    assert len({g["name"] for g in groups}) == len(groups)
    alerts = [r for g in groups for r in g["rules"]]
    names = [r["alert"] for r in alerts]
    assert len(set(names)) == len(names)
    assert set(names) >= {"FrwatchVerdict", "FrwatchNodeCordoned", "FrwatchRemediationBreakerTripped",
                          "FrwatchCaptureGaps", "FrwatchNotificationsFailing"}  # fmt: skip
    exposed = _exposed()
    for r in alerts:
        expr = promql_parser.parse(r["expr"])  # raises ValueError on a syntax error
        read = set(re.findall(r"\b(frwatch_[a-z_]+)\b", str(expr)))
        assert read and read <= exposed, f"{r['alert']} reads metrics the operator does not expose: {read - exposed}"
        assert 'service="frwatch-metrics"' in r["expr"], "each rule reads this release's operator only"
        assert DURATION.match(str(r["for"])), r["for"]
        assert r["labels"]["severity"] in {"info", "warning", "critical"}
        assert r["annotations"]["summary"] and r["annotations"]["description"]


def test_a_broken_expression_is_caught() -> None:
    with pytest.raises(ValueError):
        promql_parser.parse("sum(increase(frwatch_verdicts_total[15m]) > 0")


def test_the_notification_url_comes_from_a_secret_and_the_rest_is_a_valid_config() -> None:
    assert not [e for e in _env(render()) if e["name"].startswith("FRWATCH_NOTIFY_")]
    values = {"notifications": {"webhookSecret": {"name": "frwatch-notify", "key": "url"}, "attempts": 2}}
    env = _env(render(values))
    url = next(e for e in env if e["name"] == "FRWATCH_NOTIFY_WEBHOOK_URL")
    assert url == {"name": "FRWATCH_NOTIFY_WEBHOOK_URL",
                   "valueFrom": {"secretKeyRef": {"name": "frwatch-notify", "key": "url"}}}  # fmt: skip
    literal = {e["name"]: e["value"] for e in env if "value" in e and e["name"] in env_names()}
    config = load_config({**literal, "FRWATCH_NOTIFY_WEBHOOK_URL": "https://hooks.example/x"})
    assert config.notify.attempts == 2 and config.notify.max_age_seconds == 3600
    assert config.notify.webhook_url is not None and "hooks.example" not in repr(config.notify)


def _env(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    env: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    return env
