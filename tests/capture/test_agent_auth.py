"""The operator and the agent prove to each other they hold the pod's token without sending it
(``frwatch_operator.agent.auth``): a call is accepted once, only fresh, only for its method, path and body;
an answer's proof is bound to the call's nonce and status."""

from __future__ import annotations

from frwatch_operator.agent.auth import MAX_SKEW_S, CallChecker, answer_proof, answer_proven, sign_call

TOKEN = "k1." + "ab" * 32
NOW = 1_800_000_000.0


def test_a_signed_call_is_accepted_once_and_only_as_signed() -> None:
    checker = CallChecker(TOKEN, clock=lambda: NOW)
    header, nonce = sign_call(TOKEN, "POST", "/dump", b'{"ranks": [0]}', now=NOW)
    assert TOKEN not in header and TOKEN.split(".")[1] not in header
    assert checker.check(header, "POST", "/dump", b'{"ranks": [1]}') is None  # another body
    assert checker.check(header, "POST", "/live-dump", b'{"ranks": [0]}') is None  # another path
    assert checker.check(header, "GET", "/dump", b'{"ranks": [0]}') is None  # another method
    assert checker.check(header, "POST", "/dump", b'{"ranks": [0]}') == nonce
    assert checker.check(header, "POST", "/dump", b'{"ranks": [0]}') is None  # replayed
    other = CallChecker("k1." + "cd" * 32, clock=lambda: NOW)  # another pod's agent
    header2, _ = sign_call(TOKEN, "GET", "/live", b"", now=NOW)
    assert other.check(header2, "GET", "/live", b"") is None


def test_a_stale_or_malformed_call_is_refused() -> None:
    checker = CallChecker(TOKEN, clock=lambda: NOW)
    stale, _ = sign_call(TOKEN, "GET", "/live", b"", now=NOW - MAX_SKEW_S - 1)
    assert checker.check(stale, "GET", "/live", b"") is None
    assert checker.check(f"Bearer {TOKEN}", "GET", "/live", b"") is None
    assert checker.check("Frwatch t=1,n=zz,mac=00", "GET", "/live", b"") is None


def test_an_answers_proof_is_bound_to_the_token_the_nonce_and_the_status() -> None:
    proof = answer_proof(TOKEN, "n" * 32, 200)
    assert answer_proven(TOKEN, "n" * 32, 200, proof)
    assert not answer_proven(TOKEN, "m" * 32, 200, proof)
    assert not answer_proven(TOKEN, "n" * 32, 404, proof)
    assert not answer_proven("k1." + "cd" * 32, "n" * 32, 200, proof)
    assert not answer_proven(TOKEN, "n" * 32, 200, None)
