"""The source step's hand-over (issue 25 item 6): the copy made in the training job's namespace goes to frwatch's
namespace through a presigned URL for exactly one key, minted by the operator; the pod that PUTs holds no
store keys. What arrives is the tenant's and is unpacked as hostile input: bounded, each path checked
again, each file new under the destination, text only. Against a real SeaweedFS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from frwatch_operator.analysis import source_handover as h
from frwatch_operator.store.s3 import S3Store


def _tree(root: Path) -> None:
    (root / "app").mkdir(parents=True)
    (root / "app" / "train.py").write_text("import torch\nif rank == 1:\n    pass\n")
    (root / "app" / "bin.py").write_bytes(b"x\x00y")
    (root / "app" / "latin.py").write_bytes(b"caf\xe9")
    (root / "app" / "link.py").symlink_to("/etc/passwd")


def test_pack_keeps_text_files_under_their_image_paths_and_says_what_it_left_out(tmp_path: Path) -> None:
    _tree(tmp_path)
    data, left_out = h.pack(tmp_path)
    body = json.loads(data)
    assert body == {"version": 1, "files": {"/app/train.py": "import torch\nif rank == 1:\n    pass\n"}}
    assert sorted(x.split(" ")[0] for x in left_out) == ["/app/bin.py", "/app/latin.py", "/app/link.py"], left_out
    assert any("NUL" in x for x in left_out) and any("UTF-8" in x for x in left_out)


def test_the_bounds_are_the_copiers() -> None:
    from frwatch_operator.analysis import source_job

    assert (h.MAX_FILES, h.MAX_FILE_BYTES, h.MAX_TOTAL_BYTES) == (
        source_job.MAX_FILES, source_job.MAX_FILE_BYTES, source_job.MAX_TOTAL_BYTES,
    )  # fmt: skip


def test_pack_stops_at_the_limits(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}.py").write_text("x" * 100)
    data, left_out = h.pack(tmp_path, h.Limits(files=3, file_bytes=1000, total_bytes=250))
    assert len(json.loads(data)["files"]) == 2 and len(left_out) == 3  # the total, then the count


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("app/train.py", "not an absolute path"),
        ("/app/../etc/passwd", "'..'"),
        ("/proc/self/environ", "under /proc"),
        ("/app/\x1b[31m.py", "control character"),
    ],
)
def test_unpack_refuses_paths_the_copier_would_refuse(tmp_path: Path, name: str, why: str) -> None:
    data = json.dumps({"version": 1, "files": {name: "x = 1\n", "/app/ok.py": "y = 2\n"}}).encode()
    written, left_out = h.unpack(data, tmp_path / "dest")
    assert written == ["/app/ok.py"] and len(left_out) == 1 and why in left_out[0], left_out
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == ["dest/app/ok.py"]


def test_unpack_bounds_what_a_hostile_bundle_holds(tmp_path: Path) -> None:
    files: dict[str, Any] = {
        "/b/not-text.py": {"nested": ["objects"]}, "/b/big.py": "x" * (h.MAX_FILE_BYTES + 1), "/b/nul.py": "a\x00b",
        "/c.py": "c\n", "/c.py/under-a-file.py": "nested under a file\n",
    }  # fmt: skip
    files.update({f"/a/{i}.py": "z\n" for i in range(40)})
    written, left_out = h.unpack(json.dumps({"files": files}).encode(), tmp_path)
    assert len(written) == h.MAX_FILES and written[0] == "/c.py" and all(w.startswith("/a/") for w in written[1:])
    reasons = " ".join(left_out)
    for said in ("more than 32 files", "not text", "over the size limits", "not UTF-8 text", "cannot write it"):
        assert said in reasons, left_out
    assert all(not os.access(tmp_path / w.lstrip("/"), os.W_OK) or os.geteuid() == 0 for w in written)
    assert oct((tmp_path / "a" / "0.py").stat().st_mode & 0o777) == "0o444"
    with pytest.raises(h.HandOverError, match="not JSON"):
        h.unpack(b"[" * 100_000, tmp_path / "deep")
    with pytest.raises(h.HandOverError, match="no 'files'"):
        h.unpack(b'{"files": []}', tmp_path / "list")
    with pytest.raises(h.HandOverError, match="limit"):
        h.unpack(b" " * (h.MAX_BUNDLE_BYTES + 1), tmp_path / "huge")


def test_unpack_never_writes_through_a_link_already_in_the_destination(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    (dest / "app").mkdir(parents=True)
    (dest / "app" / "train.py").symlink_to(outside / "owned.py")
    written, left_out = h.unpack(json.dumps({"files": {"/app/train.py": "x\n"}}).encode(), dest)
    assert written == [] and "named twice" in left_out[0]
    assert not (outside / "owned.py").exists()


def test_the_presigned_url_writes_its_one_key_and_nothing_else(s3: Any, tmp_path: Path) -> None:
    """The hand-over container, run as the copy Job runs it (``frwatch source hand-over``, the URL in its env,
    no AWS_* variable at all), PUTs the bundle; the same URL cannot write another key or read one; the render
    side (``frwatch source fetch`` with the analyzer's keys) unpacks what arrived."""
    store = S3Store(s3.settings())
    root = "frwatch/team/llama/uid-h/0"
    url = store.presign_put(f"{root}/{h.BUNDLE_KEY}", 120)
    assert "X-Amz-Signature=" in url and s3.secret_key not in url
    copy = tmp_path / "copy"
    (copy / "app").mkdir(parents=True)
    (copy / "app" / "train.py").write_text("if rank == 1:\n    skip()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FRWATCH_"))}
    term = tmp_path / "term"
    term.write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "frwatch_operator.cli", "source", "hand-over", str(copy), "--termination-log", str(term)],
        env={**env, h.ENV_PUT_URL: url}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert term.read_text().startswith("handed over ")
    assert json.loads(store.get(f"{root}/{h.BUNDLE_KEY}"))["files"] == {"/app/train.py": "if rank == 1:\n    skip()\n"}

    other = url.replace(h.BUNDLE_KEY, "verdict.json")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(other, data=b"{}", method="PUT"), timeout=10)
    assert refused.value.code == 403
    assert not store.exists(f"{root}/verdict.json")
    with pytest.raises(urllib.error.HTTPError) as no_read:
        urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=10)
    assert no_read.value.code == 403

    dest = tmp_path / "dest"
    dest.mkdir()
    fetched = subprocess.run(
        [sys.executable, "-m", "frwatch_operator.cli", "source", "fetch", f"s3://{s3.bucket}/{root}/{h.BUNDLE_KEY}",
         str(dest)],
        env={**env, "AWS_ENDPOINT_URL": s3.endpoint, "AWS_REGION": s3.region, "AWS_ACCESS_KEY_ID": s3.access_key,
             "AWS_SECRET_ACCESS_KEY": s3.secret_key},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout.strip() == "unpacked 1 file"
    assert (dest / "app" / "train.py").read_text() == "if rank == 1:\n    skip()\n"


def test_a_hand_over_without_its_url_or_store_fails_saying_why(tmp_path: Path) -> None:
    term = tmp_path / "term"
    term.write_text("")
    assert h.main(["hand-over", str(tmp_path), "--termination-log", str(term)]) == 1
    assert f"{h.ENV_PUT_URL} is not set" in term.read_text()
    with pytest.raises(h.HandOverError, match="could not be reached"):
        h.put("http://127.0.0.1:9/x", b"{}", timeout=2)
