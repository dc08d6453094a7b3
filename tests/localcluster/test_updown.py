"""`cluster up` / `cluster down` with two clusters side by side: each has its own state, and `down` stops
the one the shell's $KUBECONFIG names (or --workdir), never the other one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kube import wait_for

from frwatch_dev.localcluster.updown import choose_cluster


def _env(tmp: Path, kubeconfig: str | None = None) -> dict[str, str]:
    """The clusters' state files go to this test's own temp dir: clusters of other runs on the machine
    (another checkout's suite, a developer's `up`) are not this test's business."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["TMPDIR"] = str(tmp)
    if kubeconfig:
        env["KUBECONFIG"] = kubeconfig
    return env


def _up(workdir: Path, tmp: Path) -> subprocess.Popen[bytes]:
    workdir.mkdir()
    with open(workdir / "up.out", "wb") as out:  # a file, not a pipe: nobody has to keep reading it
        return subprocess.Popen(
            [sys.executable, "-m", "frwatch_dev.localcluster.cluster", "up", "--no-operator",
             "--workdir", str(workdir)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(tmp),
        )  # fmt: skip


def _wait_up(proc: subprocess.Popen[bytes], workdir: Path) -> str:
    """Wait for `up` to print its `export KUBECONFIG=` line; return the kubeconfig."""

    def printed() -> str | None:
        assert proc.poll() is None, (workdir / "up.out").read_text()
        for line in (workdir / "up.out").read_text().splitlines():
            if "export KUBECONFIG=" in line:
                return line.split("export KUBECONFIG=", 1)[1].strip()
        return None

    return wait_for(printed, 90, "`cluster up` to be up")


def _down(tmp: Path, *args: str, kubeconfig: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frwatch_dev.localcluster.cluster", "down", *args],
        capture_output=True, text=True, env=_env(tmp, kubeconfig), timeout=90,
    )  # fmt: skip


def test_down_stops_the_cluster_its_shell_points_at(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    first, second = _up(tmp_path / "one", tmp), _up(tmp_path / "two", tmp)
    try:
        kube_one, kube_two = _wait_up(first, tmp_path / "one"), _wait_up(second, tmp_path / "two")
        assert kube_one != kube_two

        assert sorted(p.name for p in (tmp / "frwatch-localcluster").iterdir()) == sorted(
            [f"{first.pid}.json", f"{second.pid}.json"]
        )
        stopped = _down(tmp, kubeconfig=kube_two)
        assert stopped.returncode == 0, stopped.stderr
        assert wait_for(lambda: second.poll() is not None, 30, "the second cluster to stop")
        assert first.poll() is None, "`down` stopped the other cluster"

        # with one left, `down` needs no hint
        assert _down(tmp, kubeconfig=None).returncode == 0
        assert wait_for(lambda: first.poll() is not None, 30, "the first cluster to stop")
        assert "no local cluster is up" in _down(tmp, kubeconfig=None).stderr
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


def test_down_refuses_to_guess_between_several() -> None:
    states = [{"pid": 1, "workdir": "/w/one", "kubeconfig": "/w/one/kubeconfig"},
              {"pid": 2, "workdir": "/w/two", "kubeconfig": "/w/two/kubeconfig"}]  # fmt: skip
    assert choose_cluster(states, None, "/w/two/kubeconfig")[0] == states[1]
    assert choose_cluster(states, "/w/one", "/w/two/kubeconfig")[0] == states[0]
    chosen, why = choose_cluster(states, None, "/elsewhere/kubeconfig")
    assert chosen is None and "2 local clusters are up, say which with --workdir" in why
    assert choose_cluster(states, "/w/three", None) == (None, "no local cluster is up with workdir /w/three")


def test_up_in_the_background_returns_once_up_and_prints_how_to_read_the_store(tmp_path: Path) -> None:
    import re

    import boto3

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    workdir = tmp_path / "bg"
    up = subprocess.run(
        [sys.executable, "-m", "frwatch_dev.localcluster.cluster", "up", "--background", "--no-operator",
         "--workdir", str(workdir)],
        capture_output=True, text=True, env=_env(tmp), timeout=240,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        assert "running in the background" in up.stdout and "export KUBECONFIG=" in up.stdout, up.stdout
        found = re.search(r"AWS_ACCESS_KEY_ID=(\S+) AWS_SECRET_ACCESS_KEY=(\S+) AWS_ENDPOINT_URL_S3=(\S+)", up.stdout)
        assert found, up.stdout
        key, secret, endpoint = found.groups()
        s3 = boto3.session.Session().client("s3", endpoint_url=endpoint, region_name="us-east-1",
                                            aws_access_key_id=key, aws_secret_access_key=secret)  # fmt: skip
        assert "frwatch" in {b["Name"] for b in s3.list_buckets()["Buckets"]}  # the printed keys open the store
    finally:
        down = _down(tmp, "--workdir", str(workdir), kubeconfig=None)
    assert down.returncode == 0, down.stderr
