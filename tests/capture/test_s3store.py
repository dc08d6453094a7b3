"""The S3 adapter against the real SeaweedFS: round trips and the error vocabulary."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from fixtures.seaweed import STATE_DIR, SeaweedFS, reap_stale
from frwatch_operator.errors import FatalError, NotFoundError, RetryableError
from frwatch_operator.store.s3 import S3Store


def test_put_get_list_exists_round_trip(s3):
    store = S3Store(s3.settings())
    root = f"t/{uuid.uuid4()}"
    keys = [f"{root}/ranks/{r}.pickle" for r in range(3)]
    for i, key in enumerate(keys):
        assert store.put(key, bytes([i]) * 100) == f"s3://{s3.bucket}/{key}"
    assert store.list(f"{root}/") == sorted(keys)
    assert store.get(keys[1]) == bytes([1]) * 100
    assert store.exists(keys[0]) and not store.exists(f"{root}/nope")
    assert store.size(keys[2]) == 100 and store.size(f"{root}/nope") is None
    md5 = hashlib.md5(bytes([2]) * 100, usedforsecurity=False).hexdigest()
    assert store.etag(keys[2]) == md5 and store.etag(f"{root}/nope") is None  # the ETag unquoted
    with pytest.raises(NotFoundError, match="nope"):
        store.get(f"{root}/nope")


def test_wrong_credentials_are_fatal(s3):
    store = S3Store(s3.settings(secret_access_key="wrong"))
    with pytest.raises(FatalError, match="credentials"):
        store.put("t/x", b"x")


def test_store_down_is_retryable_and_back_works(s3):
    store = S3Store(s3.settings())
    with s3.down(), pytest.raises(RetryableError, match="unreachable"):
        store.put("t/down", b"x")
    assert store.put("t/down", b"x")


def test_stale_instance_of_a_dead_session_is_reaped(tmp_path):
    """A weed left behind by a crashed session (its owner is gone) is stopped by the next fixture start."""
    orphan = SeaweedFS(tmp_path)
    orphan.start()
    assert orphan.proc is not None
    pid = orphan.proc.pid
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    state = STATE_DIR / f"{pid}.json"
    body = json.loads(state.read_text())
    state.write_text(json.dumps({**body, "owner": int(dead.stdout)}))
    assert pid in reap_stale()
    orphan.proc.wait(timeout=15)
    assert not state.exists()
    time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}") or orphan.proc.returncode is not None
