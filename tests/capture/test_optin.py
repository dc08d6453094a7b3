"""Opt-in resolution: annotation, CapturePolicies, malformed input left untouched with a reason."""

from __future__ import annotations

import pytest
from builders import job, policy

from frwatch_operator import constants as c
from frwatch_operator.capture.optin import OptIn, resolve
from frwatch_operator.config import Config, RemediationSettings, env_name, env_names, load_config
from frwatch_operator.errors import FatalError

CFG = Config()


def test_annotation_enabled_uses_operator_defaults():
    d = resolve(job(), [], CFG)
    assert d.outcome is OptIn.ENABLED and d.settings is not None
    assert d.settings.buffer_size == 2000 and d.settings.bucket == CFG.s3.bucket
    assert not d.settings.remediation_enabled and d.settings.remediation_dry_run


def test_no_annotation_no_policy_is_disabled():
    assert resolve(job(capture=None), [], CFG).outcome is OptIn.DISABLED


@pytest.mark.parametrize("value", ["true", "Enabled", "yes", ""])
def test_malformed_annotation_leaves_job_untouched_with_reason(value):
    d = resolve(job(capture=value), [policy("all")], CFG)
    assert d.outcome is OptIn.UNTOUCHED
    assert c.ANN_CAPTURE in d.reason and repr(value) in d.reason


def test_disabled_annotation_wins_over_a_selecting_policy():
    d = resolve(job(capture="disabled"), [policy("all")], CFG)
    assert d.outcome is OptIn.DISABLED


def test_policy_selects_by_match_labels_and_expressions_and_overrides_settings():
    p = policy(
        "big",
        spec={
            "jobSelector": {
                "matchLabels": {"team": "llm"},
                "matchExpressions": [{"key": "size", "operator": "In", "values": ["xl", "xxl"]}],
            },
            "bufferSize": 5000,
            "bucket": "llm-dumps",
            "collectionDeadlineSeconds": 300,
        },
    )
    hit = resolve(job(capture=None, labels={"team": "llm", "size": "xl"}), [p], CFG)
    assert hit.outcome is OptIn.ENABLED and hit.policy == "big"
    assert hit.settings is not None
    assert (hit.settings.buffer_size, hit.settings.bucket, hit.settings.collection_deadline_seconds) == (
        5000,
        "llm-dumps",
        300,
    )
    assert hit.settings.prefix == CFG.s3.prefix
    miss = resolve(job(capture=None, labels={"team": "llm", "size": "s"}), [p], CFG)
    assert miss.outcome is OptIn.DISABLED


def test_policies_of_other_namespaces_are_ignored():
    assert resolve(job(capture=None), [policy("all", ns="other")], CFG).outcome is OptIn.DISABLED


def test_oldest_policy_wins_and_others_are_named():
    new = policy("new", spec={"bufferSize": 10}, created="2026-02-01T00:00:00Z")
    old = policy("old", spec={"bufferSize": 20}, created="2026-01-01T00:00:00Z")
    d = resolve(job(capture=None), [new, old], CFG)
    assert d.policy == "old" and d.settings is not None and d.settings.buffer_size == 20
    assert d.ignored_policies == ("new",) and "new" in d.reason


def test_malformed_policy_that_selects_the_job_leaves_it_untouched():
    bad = policy("bad", spec={"jobSelector": {"matchLabels": {"team": "llm"}}, "bufferSize": -1})
    d = resolve(job(labels={"team": "llm"}), [bad], CFG)
    assert d.outcome is OptIn.UNTOUCHED
    assert "'bad'" in d.reason and "bufferSize" in d.reason


def test_malformed_policy_with_unreadable_selector_leaves_job_untouched():
    bad = policy("bad", spec={"jobSelector": {"matchExpressions": [{"key": "x", "operator": "In"}]}})
    d = resolve(job(capture=None), [bad], CFG)
    assert d.outcome is OptIn.UNTOUCHED and "needs values" in d.reason


def test_malformed_policy_that_does_not_select_the_job_is_ignored():
    bad = policy("bad", spec={"jobSelector": {"matchLabels": {"team": "other"}}, "bufferSize": "lots"})
    assert resolve(job(labels={"team": "llm"}), [bad], CFG).outcome is OptIn.ENABLED


def test_unknown_policy_field_is_malformed():
    d = resolve(job(), [policy("typo", spec={"bufferSise": 10})], CFG)
    assert d.outcome is OptIn.UNTOUCHED and "bufferSise" in d.reason


def test_policy_cannot_widen_remediation():
    cfg = Config(remediation=RemediationSettings(enabled=False, dry_run=True, max_nodes_per_incident=2))
    p = policy("yolo", spec={"remediation": {"enabled": True, "dryRun": False, "maxNodesPerIncident": 50}})
    s = resolve(job(), [p], cfg).settings
    assert (
        s is not None
        and not s.remediation_enabled
        and s.remediation_dry_run
        and s.max_nodes_per_incident == 2
    )
    on = Config(remediation=RemediationSettings(enabled=True, dry_run=False, max_nodes_per_incident=5))
    narrowed = resolve(
        job(), [policy("careful", spec={"remediation": {"dryRun": True, "maxNodesPerIncident": 1}})], on
    )
    assert narrowed.settings is not None
    assert narrowed.settings.remediation_enabled and narrowed.settings.remediation_dry_run
    assert narrowed.settings.max_nodes_per_incident == 1


# --- the config these rest on --------------------------------------------------------------------------


def test_config_defaults_are_safe():
    cfg = load_config({})
    assert not cfg.remediation.enabled and cfg.remediation.dry_run
    assert cfg.fr.buffer_size == 2000 and cfg.s3.addressing_style == "path"


def test_config_reads_nested_env_and_aws_credentials():
    cfg = load_config(
        {
            "FRWATCH_S3_BUCKET": "b",
            "FRWATCH_FR_BUFFER_SIZE": "10",
            "AWS_ACCESS_KEY_ID": "k",
            "FRWATCH_AGENT_RESOURCES": '{"requests": {"cpu": "1"}}',
            "FRWATCH_REMEDIATION_ENABLED": "true",
        }
    )
    assert cfg.s3.bucket == "b" and cfg.fr.buffer_size == 10 and cfg.remediation.enabled
    assert cfg.s3.access_key_id is not None and cfg.s3.access_key_id.get_secret_value() == "k"
    assert cfg.agent.resources.requests == {"cpu": "1"}


def test_config_error_names_the_variable():
    with pytest.raises(FatalError, match="FRWATCH_FR_BUFFER_SIZE='zero'"):
        load_config({"FRWATCH_FR_BUFFER_SIZE": "zero"})
    with pytest.raises(FatalError, match="FRWATCH_AGENT_RESOURCES: not JSON"):
        load_config({"FRWATCH_AGENT_RESOURCES": "cpu=1"})


def test_injected_env_constants_are_the_config_loader_names():
    names = env_names()
    for const, path in [
        (c.ENV_POD_NAME, "pod.name"),
        (c.ENV_POD_NAMESPACE, "pod.namespace"),
        (c.ENV_POD_UID, "pod.uid"),
        (c.ENV_NODE_NAME, "pod.node"),
        (c.ENV_DUMP_DIR, "fr.dump_dir"),
        (c.ENV_JOB_KIND, "job.kind"),
        (c.ENV_JOB_NAME, "job.name"),
        (c.ENV_JOB_UID, "job.uid"),
        (c.ENV_JOB_ATTEMPT, "job.attempt"),
        (c.ENV_AGENT_CONTROL_ADDR, "agent.control_addr"),
    ]:
        assert names[const] == path
    assert env_name("s3", "bucket") == "FRWATCH_S3_BUCKET"
