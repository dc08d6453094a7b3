"""The source step's copy (issue 17): which files a verdict's frames name, bounded and normalised; the copier
the init container runs with the training image's own Python (``python3 -I -S -c TEXT ...``), run here as
the pod runs it, on a tree with links, binaries, huge files, FIFOs and non-UTF-8 text; and the Jobs (issue 25
item 6): the copy Job in the training job's namespace, where the training image runs with no credentials,
no token, a read-only root, limits and a deadline; the render Job in frwatch's namespace, where no tenant
image runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.report.html.bridge import files_read
from frwatch_operator import constants as c
from frwatch_operator.analysis import source_copier
from frwatch_operator.analysis.analyzer_job import AnalyzerRun
from frwatch_operator.analysis.source_job import (
    COPY_CONTAINER,
    FETCH_CONTAINER,
    HANDOVER_CONTAINER,
    MAX_FILES,
    SOURCE_DIR,
    TrainingImage,
    copier_command,
    copy_job,
    copy_list,
    render_job,
    template_image,
)
from frwatch_operator.config import AnalyzerSettings, S3Settings
from frwatch_operator.incident.record import IncidentIdentity
from frwatch_operator.resources import ComputeResources

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "dev/frwatch_dev/workloads/faulty_training.py"
URL = "s3://frwatch/p/team/llama/uid-1/0"


# --- the list: bounded, normalised -------------------------------------------------------------------


def test_the_list_keeps_absolute_normalised_paths_once_each_and_says_what_it_left_out() -> None:
    names = [
        "/app//train.py", "/app/train.py", "train.py", "/app/../etc/shadow", "/app/./x.py", "/proc/self/environ",
        "/dev/zero", "/run/secrets/kubernetes.io/serviceaccount/token", "/app/a\nb.py", "/app/\x00.py",
        "/" + "a" * 2000, "", "/", "/app/model.py",
    ]  # fmt: skip
    got = copy_list(names)
    assert got.paths == ("/app/train.py", "/app/model.py")
    reasons = " | ".join(got.left_out)
    assert "'train.py': not an absolute path" in reasons
    assert "'..'" in reasons and "under /proc" in reasons and "under /dev" in reasons
    assert len(got.left_out) == 8  # said, bounded: 11 were left out


def test_the_list_holds_at_most_max_files() -> None:
    got = copy_list(f"/app/m{i}.py" for i in range(MAX_FILES + 5))
    assert len(got.paths) == MAX_FILES
    assert got.left_out[0].endswith(f"more than {MAX_FILES} files")


@pytest.mark.slow
def test_the_list_names_the_workload_the_branch_runs_through(real_dumps) -> None:
    verdict = analyze(str(real_dumps("skip")), jobs=1)
    files = copy_list(files_read(verdict)).paths
    assert str(WORKLOAD) in files, files
    assert len(files) <= MAX_FILES


# --- the copier, run as the init container runs it ---------------------------------------------------


def run_copier(
    tree: Path, dest: Path, paths: list[str], max_bytes: int = 4096, total: int = 1 << 20
) -> tuple[subprocess.CompletedProcess[str], str]:
    term = tree / "termination-log"
    term.write_text("")  # the kubelet's file: the copier opens it, never creates it
    argv = copier_command(sys.executable, paths)
    # the command as built, with the test's folders for /frwatch-source and the termination log
    i = argv.index(SOURCE_DIR)
    argv[i : i + 4] = [str(dest), str(max_bytes), str(total), str(term)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={}, check=False)
    return proc, term.read_text()


def test_the_copier_copies_regular_text_files_and_skips_the_rest_with_a_reason(tmp_path: Path) -> None:
    tree, dest = tmp_path / "image", tmp_path / "src"
    (tree / "app/pkg").mkdir(parents=True)
    dest.mkdir()
    (tree / "app/train.py").write_text("if rank == 1:\n    return\n")
    (tree / "app/pkg/model.py").write_text("x = 1\n")
    (tree / "app/big.py").write_text("#" * 5000)
    (tree / "app/blob.py").write_bytes(b"\x00\x01\x02")
    (tree / "app/latin.py").write_bytes(b"caf\xe9\n")
    (tree / "outside.py").write_text("secret = 1\n")
    (tree / "app/link.py").symlink_to(tree / "outside.py")
    (tree / "linkdir").symlink_to(tree / "app")
    os.mkfifo(tree / "app/pipe.py")
    (tree / "app/dir.py").mkdir()
    names = {n: str(tree / n) for n in (
        "app/train.py", "app/pkg/model.py", "app/big.py", "app/blob.py", "app/latin.py", "app/link.py",
        "linkdir/train.py", "app/pipe.py", "app/dir.py", "app/missing.py",
    )}  # fmt: skip
    proc, summary = run_copier(tmp_path, dest, [*names.values(), str(tree / "app/train.py")])
    assert proc.returncode == 0, proc.stderr
    copied = dest / str(tree / "app/train.py").lstrip("/")
    assert copied.read_text() == "if rank == 1:\n    return\n"
    assert (dest / str(tree / "app/pkg/model.py").lstrip("/")).read_text() == "x = 1\n"
    assert not (copied.stat().st_mode & 0o222), oct(copied.stat().st_mode)  # the copy is read-only
    everything = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert everything == sorted(str(tree / n).lstrip("/") for n in ("app/train.py", "app/pkg/model.py"))
    assert summary.startswith("copied 2 of 11 files; skipped: "), summary
    for name, reason in {
        "app/big.py": "too large (5000 bytes, limit 4096)", "app/blob.py": "binary (it holds NUL bytes)",
        "app/latin.py": "not UTF-8 text (byte 3)", "app/link.py": "a link is on its path",
        "linkdir/train.py": "a link is on its path", "app/pipe.py": "not a regular file",
        "app/dir.py": "not a regular file", "app/missing.py": "not in the image",
    }.items():  # fmt: skip
        assert f"{names[name]} ({reason}" in summary, (name, summary)
    assert f"{names['app/train.py']} (named twice)" in summary


def test_the_copier_stops_at_its_total_and_refuses_what_the_operator_would(tmp_path: Path) -> None:
    tree, dest = tmp_path / "image", tmp_path / "src"
    tree.mkdir()
    dest.mkdir()
    for i in range(3):
        (tree / f"m{i}.py").write_text("y" * 1000)
    paths = [str(tree / f"m{i}.py") for i in range(3)] + ["/proc/self/environ", "rel.py", f"{tree}/../x.py"]
    proc, summary = run_copier(tmp_path, dest, paths, max_bytes=4096, total=2500)
    assert proc.returncode == 0, proc.stderr
    assert summary.startswith("copied 2 of 6 files"), summary
    assert "m2.py (over the copy's total of bytes)" in summary
    assert "/proc/self/environ (under /proc: not code)" in summary
    assert "rel.py (not an absolute path" in summary and "'.' or '..' in the path" in summary


def test_the_copier_refuses_wrong_arguments_and_never_creates_its_termination_log(tmp_path: Path) -> None:
    assert source_copier.main(["/x", "many", "1", "/t", "--"]) == 2
    dest = tmp_path / "src"
    dest.mkdir()
    assert source_copier.main([str(dest), "10", "10", str(tmp_path / "no-log"), "--"]) == 0
    assert not (tmp_path / "no-log").exists()


# --- the Job ---------------------------------------------------------------------------------------


INCIDENT = IncidentIdentity("team", "llama-0", "uid-inc")
PUT_URL = "http://s3:8333/frwatch/p/team/llama/uid-1/0/source/files.json?X-Amz-Signature=abc"
TRAINING = TrainingImage("registry.example/team/trainer:7", "pod llama-worker-0", ("regcred",))
FRWATCH_IMAGE = "ghcr.io/frwatch/frwatch:0.1.0"


def copying(**kw: object) -> dict:
    settings = kw.pop("settings", AnalyzerSettings(namespace="frwatch-system", image_pull_secrets="frwatch-pull",
                                                   image="analyzer:9", source_deadline_seconds=240))  # fmt: skip
    return copy_job(INCIDENT, training=TRAINING, files=["/app/train.py"], put_url=PUT_URL, image=FRWATCH_IMAGE,
                    settings=settings)  # fmt: skip


def rendering() -> dict:
    run = AnalyzerRun(
        image=FRWATCH_IMAGE, resources=ComputeResources(limits={"cpu": "2"}), deadline_seconds=600,
        backoff_limit=1, ttl_seconds_after_finished=60,
    )  # fmt: skip
    settings = AnalyzerSettings(namespace="frwatch-system", image_pull_secrets="frwatch-pull")
    return render_job(
        INCIDENT, evidence_url=URL, s3=S3Settings(endpoint_url="http://s3:8333"), run=run,
        copied="copied 1 of 1 files", settings=settings,
    )  # fmt: skip


def _secret_refs(container: dict) -> list[str]:
    refs = [e["valueFrom"]["secretKeyRef"]["name"] for e in container.get("env") or [] if "valueFrom" in e]
    return refs + [e["secretRef"]["name"] for e in container.get("envFrom") or [] if "secretRef" in e]


def test_the_copy_job_runs_in_the_training_jobs_namespace_with_nothing_to_steal() -> None:
    manifest = copying()
    meta, spec = manifest["metadata"], manifest["spec"]
    assert meta["namespace"] == "team" and meta["name"] == "frwatch-source-llama-0"  # never frwatch-system
    assert meta["ownerReferences"][0]["uid"] == "uid-inc"  # the Incident owns it: deleted with it
    assert spec["activeDeadlineSeconds"] == 240 and spec["backoffLimit"] == 0  # a total deadline, no retry
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and "serviceAccountName" not in pod
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]  # the training pod's own, in its namespace
    [copier] = pod["initContainers"]
    [hand_over] = pod["containers"]
    assert copier["name"] == COPY_CONTAINER and copier["image"] == "registry.example/team/trainer:7"
    assert copier["command"][:4] == ["python3", "-I", "-S", "-c"] and copier["command"][-1] == "/app/train.py"
    assert "env" not in copier and "envFrom" not in copier  # no endpoint, no keys, no URL: the copy needs none
    assert hand_over["name"] == HANDOVER_CONTAINER and hand_over["image"] == FRWATCH_IMAGE
    assert hand_over["command"][:3] == ["frwatch", "source", "hand-over"]
    assert hand_over["env"] == [{"name": "FRWATCH_SOURCE_PUT_URL", "value": PUT_URL}]  # one key's URL, no keys
    for container in (copier, hand_over):
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        }  # fmt: skip
        assert container["resources"]["limits"]["memory"] and container["resources"]["limits"]["cpu"]
        assert not _secret_refs(container)
        assert [m["mountPath"] for m in container["volumeMounts"]] == [SOURCE_DIR]
    assert hand_over["volumeMounts"][0]["readOnly"] is True
    assert pod["volumes"] == [{"name": "source", "emptyDir": {"sizeLimit": "40Mi"}}]  # no Secret volume
    text = repr(manifest)
    assert "AWS_" not in text and "frwatch-s3" not in text and "frwatch-pull" not in text


def test_the_render_job_runs_in_frwatchs_namespace_and_runs_no_tenant_image() -> None:
    manifest = rendering()
    meta = manifest["metadata"]
    assert meta["name"].endswith("-src") and meta["namespace"] == "frwatch-system"
    assert meta["annotations"][c.ANN_SOURCE_COPIED] == "copied 1 of 1 files"
    pod = manifest["spec"]["template"]["spec"]
    images = {x["image"] for x in pod["initContainers"] + pod["containers"]}
    assert images == {FRWATCH_IMAGE}  # the training image never runs here
    [fetch] = pod["initContainers"]
    assert fetch["name"] == FETCH_CONTAINER
    assert fetch["command"][:4] == ["frwatch", "source", "fetch", f"{URL}/source/files.json"]
    assert {"name": "source", "mountPath": SOURCE_DIR} in fetch["volumeMounts"]
    [analyzer] = pod["containers"]
    assert {"name": "source", "mountPath": SOURCE_DIR, "readOnly": True} in analyzer["volumeMounts"]
    cmd = analyzer["command"]
    assert cmd[cmd.index("--source") + 1] == SOURCE_DIR and cmd[cmd.index("--html") + 1] == f"{URL}/report.html"
    assert "--out" not in cmd and "--report-out" not in cmd  # the verdict is the analyzer Job's, not rewritten
    assert cmd.count("--html") == 1
    assert {"name": "source", "emptyDir": {"sizeLimit": "40Mi"}} in pod["volumes"]
    assert pod["imagePullSecrets"] == [{"name": "frwatch-pull"}]
    assert manifest["spec"]["template"]["metadata"]["labels"][c.LABEL_COMPONENT] == "analyzer-source"


def test_the_training_image_is_read_from_each_kind_of_job() -> None:
    pytorch = {"spec": {"pytorchReplicaSpecs": {"Master": {"template": {"spec": {"containers": [
        {"name": c.AGENT_CONTAINER, "image": "agent"}, {"name": "pytorch", "image": "trainer:1"}]}}}}}}  # fmt: skip
    jobset = {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
        "containers": [{"name": "node", "image": "trainer:2"}]}}}}}]}}  # fmt: skip
    trainjob = {"spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"image": "trainer:3"}}}
    assert [template_image(x) for x in (pytorch, jobset, trainjob)] == ["trainer:1", "trainer:2", "trainer:3"]
    assert template_image({"spec": {"runtimeRef": {"name": "torch-distributed"}}}) == ""
