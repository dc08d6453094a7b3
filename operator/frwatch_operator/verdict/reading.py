"""Read the analyzer's verdict.json from S3 and validate it (bounded: never more than MAX_VERDICT_BYTES read).

A missing or malformed verdict is a precise :class:`VerdictUnavailable` (reason ``VerdictMissing`` /
``VerdictMalformed`` / ``VerdictTooLarge``), which the verdict loop turns into a failed Incident. A store
that does not answer is a :class:`RetryableError` from the S3 adapter: the loop tries again later.
"""

from __future__ import annotations

from pydantic import ValidationError

from frwatch_analyzers.store.layout import VERDICT, RootUrl
from frwatch_analyzers.verdict import SCHEMA_VERSION, Verdict
from frwatch_analyzers.verdict_binding import digest_of
from frwatch_operator.errors import FatalError, NotFoundError
from frwatch_operator.resources import ConditionReason
from frwatch_operator.store.s3 import S3Store

#: A verdict larger than this is refused, whatever a HEAD said before the read (a 16k-rank verdict with
#: evidence is a few MB; parsing 16 MiB costs the operator about 100 MB for a moment).
MAX_VERDICT_BYTES = 16 * 1024 * 1024


class VerdictUnavailable(FatalError):
    """The verdict cannot be used: ``reason`` says how (CamelCase, for the Incident and the Event)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def parse_verdict(data: bytes, url: str) -> Verdict:
    """A verdict from bytes; :class:`VerdictUnavailable` (``VerdictMalformed``) saying what is wrong."""
    try:
        verdict = Verdict.model_validate_json(data)
    except ValidationError as exc:
        errors = exc.errors()
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
        what = errors[0]["msg"] if errors else str(exc)
        raise VerdictUnavailable(
            ConditionReason.VERDICT_MALFORMED,
            f"{url} is not a valid verdict: {where or '(document)'}: {what} ({exc.error_count()} problem(s)); "
            "re-run the analyzer Job, or check that its image matches the operator's version",
        ) from exc
    if verdict.schema_version.split("/")[:3] != SCHEMA_VERSION.split("/")[:3]:
        raise VerdictUnavailable(
            ConditionReason.VERDICT_MALFORMED,
            f"{url}: schema_version {verdict.schema_version!r}, this operator reads {SCHEMA_VERSION!r}; "
            "use an analyzer image of the operator's version",
        )
    return verdict


def read_verdict(store: S3Store, evidence_url: str, digest: str | None = None) -> Verdict:
    """The verdict of an attempt. RetryableError when the store does not answer. ``digest``: the sha256 the
    analyzer Job's termination message gives for the bytes it wrote; stored bytes of another digest are
    refused (``VerdictNotBound``): whoever replaced them, the operator acts only on the analyzer's verdict."""
    root = RootUrl.parse(evidence_url)
    url, bucket, key = root.verdict_url, root.bucket, root.key(VERDICT)
    size = store.size(key, bucket=bucket)
    if size is None:
        raise VerdictUnavailable(
            ConditionReason.VERDICT_MISSING,
            f"{url} does not exist: the analyzer ended without writing its verdict (see the analyzer "
            "Job's termination message and logs)",
        )
    if size > MAX_VERDICT_BYTES:
        raise VerdictUnavailable(
            ConditionReason.VERDICT_TOO_LARGE, f"{url} is {size} bytes, more than the {MAX_VERDICT_BYTES} this operator reads"
        )
    try:
        data = store.get_bounded(key, MAX_VERDICT_BYTES, bucket=bucket)
    except NotFoundError as exc:
        raise VerdictUnavailable(ConditionReason.VERDICT_MISSING, f"{url} vanished while being read: {exc}") from exc
    if data is None:  # replaced by a larger object since the HEAD
        raise VerdictUnavailable(
            ConditionReason.VERDICT_TOO_LARGE, f"{url} grew past the {MAX_VERDICT_BYTES} bytes this operator reads while it was read"
        )
    if digest is not None and digest_of(data) != digest:
        raise VerdictUnavailable(
            ConditionReason.VERDICT_NOT_BOUND,
            f"{url} is not the verdict the analyzer Job wrote (sha256 {digest_of(data)[:12]}..., the Job's "
            f"termination message says {digest[:12]}...): it was replaced in the store after the analyzer wrote it; "
            "frwatch acts on nothing it says. Check who holds write access to this prefix (docs/store-keys.md)",
        )
    return parse_verdict(data, url)
