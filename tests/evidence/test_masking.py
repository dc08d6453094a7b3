"""Secrets in log text are masked before any of it reaches a verdict, a report, an annotation or an Event."""

from __future__ import annotations

import pytest

from frwatch_analyzers.evidence.masking import MASK, mask

#: Fake credentials of real shapes (none is valid anywhere).
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
GH = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


@pytest.mark.parametrize(
    ("line", "secret", "kept"),
    [
        (f"export AWS_ACCESS_KEY_ID={AWS_ID}", AWS_ID, "AWS_ACCESS_KEY_ID="),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET} python train.py", AWS_SECRET, "AWS_SECRET_ACCESS_KEY="),
        (
            "curl -H 'Authorization: Bearer abcdef0123456789abcdef' https://x",
            "abcdef0123456789abcdef",
            "Bearer ",
        ),
        ("db connect password=hunter2hunter2 host=db", "hunter2hunter2", "password="),
        ('{"api_key": "s3cr3t-v4lue-123"}', "s3cr3t-v4lue-123", '"api_key": "'),
        (f"cloning with token {GH}", GH, "cloning with"),
        (f"HF_TOKEN={HF}", HF, "HF_TOKEN="),
        (f"hub login {HF} ok", HF, "hub login"),
        (f"cookie session={JWT}", JWT, "cookie"),
        ("pip install from https://bob:pa55w0rd@pypi.example.com/simple", "pa55w0rd", "https://bob:"),
        (
            "key: -----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY----- done",
            "MIIEow",
            "done",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE (cut by the tail)",
            "b3BlbnNzaC1rZXktdjE",
            "",
        ),
    ],
)
def test_secret_shapes_are_masked_and_their_names_kept(line: str, secret: str, kept: str) -> None:
    out = mask(line)
    assert secret not in out and MASK in out
    assert kept in out


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: corrupt sample in shard 2 at step 3: cannot decode record",
        "NCCL WARN NET/IB : Got completion from peer 10.0.0.7<54862> with status=12 opcode=0 len=0 vendor err 129",
        '  File "/app/train.py", line 88, in train_step',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 3; 79.15 GiB total capacity)",
    ],
)
def test_ordinary_failure_lines_pass_unchanged(line: str) -> None:
    assert mask(line) == line


def test_masking_a_long_hostile_line_stays_linear() -> None:
    line = "password=" * 20000 + "a" * 100000
    out = mask(line)
    assert MASK in out and len(out) < len(line)
