"""Flight Recorder injection into a pod: what is added, what is kept, what is warned about, idempotence."""

from __future__ import annotations

import copy

import jsonpatch
import pytest
from builders import env_of, pod

from frwatch_operator import constants as c
from frwatch_operator.capture.optin import defaults
from frwatch_operator.capture.sidecar import JobContext
from frwatch_operator.capture.webhook_patch import (
    GRACE_MARGIN_SECONDS,
    InjectionError,
    apply_ops,
    attempt_of,
    inject,
)
from frwatch_operator.config import AgentSettings, Config, env_name

CFG = Config()
SETTINGS = defaults(CFG)
JOB = JobContext("PyTorchJob", "llama", "uid-1", "0")


def injected(p):
    result = inject(p, SETTINGS, CFG, JOB)
    # the ops are valid RFC 6902 against the original (checked by an independent implementation)
    out = jsonpatch.apply_patch(copy.deepcopy(p), result.ops)
    assert apply_ops(copy.deepcopy(p), result.ops) == out
    return out, result.warnings


def test_every_training_container_gets_fr_variables_under_every_name_when_its_torch_is_unknown():
    out, warnings = injected(pod(containers=2))
    assert warnings == []
    prefix = f"{c.DUMP_MOUNT_PATH}/{c.DUMP_FILE_PREFIX}"
    for cont in out["spec"]["containers"]:
        env = env_of(cont)
        # the default ("any"): both names, so a torch older than 2.9 (old names only) still writes its dumps
        # into the shared volume; a job that names its torch gets one set (tests/capture/test_torch_warnings.py)
        assert env[c.ENV_FR_BUFFER_SIZE] == "2000" and env[c.ENV_FR_BUFFER_SIZE_OLD] == "2000"
        assert env[c.ENV_FR_DUMP_TEMP_FILE] == prefix and env[c.ENV_FR_DUMP_TEMP_FILE_OLD] == prefix
        assert env[c.ENV_NCCL_PIPE_FILE] == prefix
        assert env[c.ENV_NCCL_DUMP_ON_TIMEOUT] == "1"
        assert env[c.ENV_NODE_NAME] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        assert {"name": c.DUMP_VOLUME, "mountPath": c.DUMP_MOUNT_PATH} in cont["volumeMounts"]


def test_agent_is_a_native_sidecar_with_volume_identity_and_store():
    out, _ = injected(pod(init=[{"name": "wait-for-master", "image": "busybox"}]))
    inits = out["spec"]["initContainers"]
    assert [i["name"] for i in inits] == [c.AGENT_CONTAINER, "wait-for-master"]
    agent = inits[0]
    assert agent["restartPolicy"] == "Always"
    env = env_of(agent)
    assert env[c.ENV_JOB_NAME] == "llama" and env[c.ENV_JOB_UID] == "uid-1" and env[c.ENV_JOB_ATTEMPT] == "0"
    assert env["FRWATCH_S3_BUCKET"] == SETTINGS.bucket and env[c.ENV_DUMP_DIR] == c.DUMP_MOUNT_PATH
    assert env[c.ENV_POD_NAME] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env[c.ENV_AGENT_CONTROL_ADDR] == {"fieldRef": {"fieldPath": "status.podIP"}}  # not 0.0.0.0
    assert env[env_name("agent", "drain_seconds")] == str(CFG.agent.drain_seconds)
    assert env["AWS_ACCESS_KEY_ID"]["secretKeyRef"]["optional"] is True
    volumes = {v["name"]: v for v in out["spec"]["volumes"]}
    assert set(volumes) == {c.DUMP_VOLUME} and "emptyDir" in volumes[c.DUMP_VOLUME]
    assert out["metadata"]["annotations"][c.ANN_INJECTED]


@pytest.mark.parametrize(
    ("declared", "image", "new", "old"),
    [
        ("2.5", "registry/trainer:v1", False, True),  # the job says torch 2.5: old names (all it reads)
        ("2.13.0+cu128", "registry/trainer:v1", True, False),
        ("any", "registry/trainer:v1", True, True),
        ("", "pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime", False, True),  # the official image's tag
        ("", "mirror.corp:5000/pytorch/pytorch:2.10.0-cuda13.0-cudnn9-devel", True, False),
        ("2.13", "pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime", True, False),  # the job's word first
        ("", "registry/trainer:2.4", True, True),  # another image's tag says nothing: the default (any: both)
    ],
)
def test_the_renamed_variables_follow_the_jobs_torch(declared: str, image: str, new: bool, old: bool) -> None:
    p = pod()
    p["spec"]["containers"][0]["image"] = image
    settings = SETTINGS.model_copy(update={"torch_version": declared})
    out = jsonpatch.apply_patch(copy.deepcopy(p), inject(p, settings, CFG, JOB).ops)
    env = env_of(out["spec"]["containers"][0])
    for name_new, name_old in ((c.ENV_FR_BUFFER_SIZE, c.ENV_FR_BUFFER_SIZE_OLD),
                               (c.ENV_FR_DUMP_TEMP_FILE, c.ENV_FR_DUMP_TEMP_FILE_OLD)):  # fmt: skip
        assert (name_new in env, name_old in env) == (new, old), (declared, image, sorted(env))
    assert env[c.ENV_NCCL_DUMP_ON_TIMEOUT] == "1"  # not renamed: always set


def test_the_operators_default_torch_version_decides_for_a_job_that_says_nothing() -> None:
    cfg = Config.model_validate({"fr": {"torch_version": "2.6"}})
    out = jsonpatch.apply_patch(copy.deepcopy(pod()), inject(pod(), defaults(cfg), cfg, JOB).ops)
    env = env_of(out["spec"]["containers"][0])
    assert c.ENV_FR_BUFFER_SIZE_OLD in env and c.ENV_FR_BUFFER_SIZE not in env


def test_the_jobs_torch_version_annotation_reaches_the_settings() -> None:
    from frwatch_operator.capture.optin import resolve

    job = {"metadata": {"name": "j", "namespace": "team",
                        "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED, c.ANN_TORCH_VERSION: " 2.5 "}}}  # fmt: skip
    decision = resolve(job, [], CFG)
    assert decision.settings is not None and decision.settings.torch_version == "2.5"


def test_a_users_old_name_gives_the_new_name_its_value() -> None:
    out, _ = injected(pod(env=[{"name": c.ENV_FR_BUFFER_SIZE_OLD, "value": "5000"}]))
    env = env_of(out["spec"]["containers"][0])
    assert env[c.ENV_FR_BUFFER_SIZE] == "5000"  # torch reads the new name first: never 2000 over the user's 5000


def test_user_values_are_kept_and_mirrored_to_the_other_name():
    user = [
        {"name": c.ENV_FR_BUFFER_SIZE_OLD, "value": "5000"},
        {"name": c.ENV_NCCL_DUMP_ON_TIMEOUT, "value": "1"},
    ]
    p = pod(env=user)
    settings = SETTINGS.model_copy(update={"torch_version": "any"})
    result = inject(p, settings, CFG, JOB)
    out, warnings = jsonpatch.apply_patch(copy.deepcopy(p), result.ops), result.warnings
    env = env_of(out["spec"]["containers"][0])
    assert env[c.ENV_FR_BUFFER_SIZE_OLD] == "5000" and env[c.ENV_FR_BUFFER_SIZE] == "5000"
    names = [e["name"] for e in out["spec"]["containers"][0]["env"]]
    assert names.count(c.ENV_NCCL_DUMP_ON_TIMEOUT) == 1 and warnings == []


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        (c.ENV_FR_BUFFER_SIZE, "0", "turns the Flight Recorder off"),
        (c.ENV_FR_BUFFER_SIZE_OLD, "0", "turns the Flight Recorder off"),
        (c.ENV_NCCL_ASYNC_ERROR_HANDLING, "1", "pytorch#121055"),
        (c.ENV_NCCL_DUMP_ON_TIMEOUT, "0", "will not dump"),
        (c.ENV_FR_DUMP_TEMP_FILE, "/tmp/mine_", "outside the shared dump folder"),
    ],
)
def test_user_values_that_lose_the_dump_are_kept_but_warned(name, value, needle):
    out, warnings = injected(pod(env=[{"name": name, "value": value}]))
    assert env_of(out["spec"]["containers"][0])[name] == value
    assert len(warnings) == 1 and needle in warnings[0] and "'pytorch'" in warnings[0]


def test_control_address_is_given_to_the_agent_only():
    out, _ = injected(pod())
    assert c.ENV_AGENT_CONTROL_ADDR not in env_of(out["spec"]["containers"][0])


@pytest.mark.parametrize(
    ("user", "expected", "warned"),
    [(None, 30, False), (10, 30, True), (30, 30, False), (120, 120, False)],
    ids=["absent-set", "lower-raised", "enough-kept", "longer-kept"],
)
def test_termination_grace_leaves_the_agent_its_drain_budget(user, expected, warned):
    assert CFG.agent.drain_seconds + GRACE_MARGIN_SECONDS == 30  # the default budget: Kubernetes' default too
    p = pod()
    if user is not None:
        p["spec"]["terminationGracePeriodSeconds"] = user
    out, warnings = injected(p)
    assert out["spec"]["terminationGracePeriodSeconds"] == expected
    assert [w for w in warnings if "terminationGracePeriodSeconds" in w] == (
        [f"frwatch: terminationGracePeriodSeconds raised from {user} to 30: the frwatch agent needs 25 s "
         "after SIGTERM to upload the last Flight Recorder dumps"] if warned else []
    )  # fmt: skip


def test_termination_grace_follows_the_configured_budget():
    cfg = Config(agent=AgentSettings(drain_seconds=42.5))
    out = apply_ops(pod(), inject(pod(), defaults(cfg), cfg, JOB).ops)
    assert out["spec"]["terminationGracePeriodSeconds"] == 43 + GRACE_MARGIN_SECONDS


def test_second_injection_is_a_no_op():
    once, _ = injected(pod())
    again = inject(once, SETTINGS, CFG, JOB)
    assert again.ops == [] and again.warnings == []


def test_partial_earlier_injection_is_completed_not_duplicated():
    once, _ = injected(pod())
    del once["metadata"]["annotations"][c.ANN_INJECTED]
    twice, _ = injected(once)
    assert [v["name"] for v in twice["spec"]["volumes"]].count(c.DUMP_VOLUME) == 1
    assert [i["name"] for i in twice["spec"]["initContainers"]].count(c.AGENT_CONTAINER) == 1
    names = [e["name"] for e in twice["spec"]["containers"][0]["env"]]
    assert len(names) == len(set(names))


def test_annotations_and_lists_absent_or_present_both_patch_cleanly():
    injected(pod(annotations={"a": "b"}, env=[{"name": "X", "value": "1"}]))
    p = pod()
    p["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    out, _ = injected(p)
    assert out["spec"]["volumes"][0]["name"] == "data"


def test_input_is_not_mutated():
    p = pod(env=[{"name": "X", "value": "1"}])
    before = copy.deepcopy(p)
    inject(p, SETTINGS, CFG, JOB)
    assert p == before


@pytest.mark.parametrize(
    "mangle",
    [
        lambda p: p["spec"].__setitem__("containers", "pytorch"),
        lambda p: p["spec"].__setitem__("containers", []),
        lambda p: p["spec"]["containers"][0].__setitem__("env", {"A": "1"}),
        lambda p: p.__setitem__("spec", None),
        lambda p: p["metadata"].__setitem__("annotations", ["x"]),
        lambda p: p["spec"].__setitem__("terminationGracePeriodSeconds", "30"),
    ],
)
def test_malformed_pods_raise_injection_error(mangle):
    p = pod()
    mangle(p)
    with pytest.raises(InjectionError):
        inject(p, SETTINGS, CFG, JOB)


def test_attempt_comes_from_jobset_label_when_present():
    assert attempt_of(pod(labels={c.LABEL_JOBSET_RESTART_ATTEMPT: "3"}), "0") == "3"
    assert attempt_of(pod(), "2") == "2"
