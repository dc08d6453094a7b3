"""The S3 adapter: the only module on the operator side that talks to the object store (boto3).

Every call either succeeds or raises one of frwatch's errors: :class:`RetryableError` (store unreachable,
timeouts, throttling, 5xx: try again later), :class:`NotFoundError` (no such key) or :class:`FatalError`
(bad credentials, no such bucket, access denied: retrying will not help until someone fixes it).
botocore retries each call ``config.s3.max_attempts`` times; longer outages are the caller's loop.

Large files are streamed (:meth:`S3Store.put_file`): boto3's managed transfer from a file name, multipart
above :data:`UPLOAD_PART_BYTES`, :data:`UPLOAD_CONCURRENCY` parts at a time, each read from the file while
it is sent: memory does not grow with the file (the agent's limit is 256 Mi; a dump can be larger).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import boto3
import boto3.s3.transfer
import botocore.config
import botocore.exceptions

from frwatch_analyzers.store.layout import s3_url
from frwatch_operator.config import S3Settings
from frwatch_operator.errors import FatalError, NotFoundError, RetryableError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import HeadObjectOutputTypeDef

T = TypeVar("T")

_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
_FATAL = {
    "NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidBucketName",
    "AllAccessDisabled", "InvalidRequest", "403",
}  # fmt: skip
_NETWORK = (
    botocore.exceptions.EndpointConnectionError,
    botocore.exceptions.ConnectionError,
    botocore.exceptions.ConnectTimeoutError,
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ConnectionClosedError,
    botocore.exceptions.ResponseStreamingError,
)


#: What to set when boto3 found no credentials at all (botocore's "Unable to locate credentials").
NO_CREDENTIALS = (
    "no store credentials found (boto3 looked for AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a web identity "
    "AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE, container credentials and the instance metadata). Set one: the "
    "operator: the chart's s3.existingSecret, or storeAccess.mode=identity with an identity on its "
    "ServiceAccount (storeAccess.operatorServiceAccountAnnotations); an agent: the Secret named by "
    "s3.agentCredentialsSecret in the job's namespace, or an identity on the training pods' ServiceAccount "
    '(docs/install.md, "Store credentials")'
)

#: Part size of a multipart upload, and the size from which a file is sent in parts (S3's minimum part is 5 MiB).
UPLOAD_PART_BYTES = 8 * 1024 * 1024
#: Parts sent at once (threads of the transfer).
UPLOAD_CONCURRENCY = 2


def transfer_config() -> boto3.s3.transfer.TransferConfig:
    """boto3's managed transfer, bounded: ``UPLOAD_CONCURRENCY`` parts of ``UPLOAD_PART_BYTES`` in flight.
    From a file name each part is read while it is sent; s3transfer's in-memory part limit (which applies to
    file objects, read part by part into memory) is set to the same bound in case one is ever given."""
    config = boto3.s3.transfer.TransferConfig(
        multipart_threshold=UPLOAD_PART_BYTES,
        multipart_chunksize=UPLOAD_PART_BYTES,
        max_concurrency=UPLOAD_CONCURRENCY,
        use_threads=True,
        preferred_transfer_client="classic",
    )
    config.max_in_memory_upload_chunks = UPLOAD_CONCURRENCY  # s3transfer's own knob (default 10)
    return config


class S3Store:
    """put/get/list/exists on one S3 endpoint (path-style by default). Thread-safe (one boto3 client)."""

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self.default_bucket = settings.bucket

        def secret(value: Any) -> str | None:
            return value.get_secret_value() if value is not None else None

        self._client: S3Client = boto3.session.Session().client(
            "s3",
            endpoint_url=settings.endpoint_url,
            region_name=settings.region,
            aws_access_key_id=secret(settings.access_key_id),
            aws_secret_access_key=secret(settings.secret_access_key),
            aws_session_token=secret(settings.session_token),
            config=botocore.config.Config(
                s3={"addressing_style": settings.addressing_style},
                connect_timeout=settings.connect_timeout_seconds,
                read_timeout=settings.read_timeout_seconds,
                retries={"max_attempts": settings.max_attempts, "mode": "standard"},
                signature_version="s3v4",
            ),
        )
        self._transfer = transfer_config()

    def url(self, key: str, bucket: str | None = None) -> str:
        return s3_url(bucket or self.default_bucket, key)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except _NETWORK as exc:
            raise RetryableError(f"S3 {what}: store unreachable ({exc}); will retry", delay=1.0) from exc
        except botocore.exceptions.ClientError as exc:
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            msg = f"S3 {what}: {code or status} {err.get('Message', '')}".rstrip()
            if code in _NOT_FOUND or (status == 404 and code not in _FATAL):
                raise NotFoundError(msg) from exc
            if code in _FATAL or (400 <= status < 500 and status not in (408, 429)):
                raise FatalError(
                    f"{msg} (check the bucket name, the credentials and their permissions)"
                ) from exc
            raise RetryableError(msg + "; will retry", delay=2.0) from exc
        except botocore.exceptions.NoCredentialsError as exc:
            raise FatalError(f"S3 {what}: {NO_CREDENTIALS}") from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise RetryableError(f"S3 {what}: {exc}", delay=2.0) from exc

    def put(self, key: str, data: bytes, *, bucket: str | None = None, content_type: str = "") -> str:
        """Store ``data`` at ``key`` and confirm it landed intact (ETag = MD5). Returns the s3:// URL."""
        b = bucket or self.default_bucket
        md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
        extra: dict[str, Any] = {"ContentType": content_type} if content_type else {}
        response = self._call(
            f"put s3://{b}/{key}", lambda: self._client.put_object(Bucket=b, Key=key, Body=data, **extra)
        )
        etag = str(response.get("ETag", "")).strip('"')
        if etag and "-" not in etag and etag != md5:
            raise RetryableError(f"S3 put s3://{b}/{key}: stored ETag {etag} != MD5 {md5}; will retry")
        return s3_url(b, key)

    def put_file(
        self,
        key: str,
        path: str,
        *,
        size: int,
        md5: str = "",
        bucket: str | None = None,
        content_type: str = "",
    ) -> str:
        """Stream the file at ``path`` (``size`` bytes) to ``key``, in parts when it is large, each part read
        from the file while it is sent (never held whole), then confirm what landed: its size, and its ETag
        against ``md5`` (the MD5 hex digest of the bytes) when it was sent in one part. Returns the s3:// URL.

        ``path`` may name a descriptor the caller holds open (``/proc/self/fd/<n>``): the very file it
        opened is read, whatever its name points at by then."""
        b = bucket or self.default_bucket
        extra: dict[str, Any] = {"ContentType": content_type} if content_type else {}
        where = s3_url(b, key)
        self._call(
            f"upload {where}",
            lambda: self._client.upload_file(path, b, key, ExtraArgs=extra, Config=self._transfer),
        )
        head = self._call(f"head {where}", lambda: self._client.head_object(Bucket=b, Key=key))
        stored, etag = int(head.get("ContentLength", -1)), str(head.get("ETag", "")).strip('"')
        if stored != size:
            raise RetryableError(f"S3 upload {where}: {stored} bytes stored, {size} sent; will retry")
        if md5 and etag and "-" not in etag and etag != md5:
            raise RetryableError(f"S3 upload {where}: stored ETag {etag} != MD5 {md5}; will retry")
        return where

    def get(self, key: str, *, bucket: str | None = None) -> bytes:
        """The object's bytes; :class:`NotFoundError` when absent."""
        b = bucket or self.default_bucket

        def read() -> bytes:
            return self._client.get_object(Bucket=b, Key=key)["Body"].read()

        return self._call(f"get s3://{b}/{key}", read)

    def _head(self, key: str, *, bucket: str | None = None) -> HeadObjectOutputTypeDef | None:
        """The object's HEAD (``ContentLength``, ``ETag`` ...), None when absent."""
        b = bucket or self.default_bucket
        try:
            return self._call(f"head s3://{b}/{key}", lambda: self._client.head_object(Bucket=b, Key=key))
        except NotFoundError:
            return None

    def exists(self, key: str, *, bucket: str | None = None) -> bool:
        return self._head(key, bucket=bucket) is not None

    def size(self, key: str, *, bucket: str | None = None) -> int | None:
        """The object's size in bytes, None when absent."""
        head = self._head(key, bucket=bucket)
        return None if head is None else int(head.get("ContentLength", 0))

    def etag(self, key: str, *, bucket: str | None = None) -> str | None:
        """The object's ETag (the MD5 of a single-part upload), None when absent."""
        head = self._head(key, bucket=bucket)
        return None if head is None else str(head.get("ETag", "")).strip('"')

    def get_bounded(self, key: str, limit: int, *, bucket: str | None = None) -> bytes | None:
        """The object's bytes when it holds at most ``limit`` bytes, None when it holds more (never more
        than ``limit + 1`` bytes are read, whatever a HEAD said before); :class:`NotFoundError` when absent."""
        b = bucket or self.default_bucket

        def read() -> bytes | None:
            body = self._client.get_object(Bucket=b, Key=key)["Body"]
            try:
                data = body.read(limit + 1)
            finally:
                body.close()
            return data if len(data) <= limit else None

        return self._call(f"get s3://{b}/{key}", read)

    def list(self, prefix: str, *, bucket: str | None = None) -> list[str]:
        """Every key under ``prefix`` (all pages), sorted."""
        return sorted(self.iter_keys(prefix, bucket=bucket))

    def iter_keys(self, prefix: str, *, bucket: str | None = None) -> Iterator[str]:
        b = bucket or self.default_bucket
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": b, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call(
                f"list s3://{b}/{prefix}", functools.partial(self._client.list_objects_v2, **kwargs)
            )
            for item in page.get("Contents", []):
                yield str(item["Key"])
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def delete(self, key: str, *, bucket: str | None = None) -> None:
        b = bucket or self.default_bucket
        self._call(f"delete s3://{b}/{key}", lambda: self._client.delete_object(Bucket=b, Key=key))

    def ensure_bucket(self, bucket: str | None = None) -> None:
        """Create the bucket if it does not exist (demo and tests; production buckets are provisioned)."""
        b = bucket or self.default_bucket
        try:
            self._call(f"head bucket {b}", lambda: self._client.head_bucket(Bucket=b))
        except (NotFoundError, FatalError):
            self._call(f"create bucket {b}", lambda: self._client.create_bucket(Bucket=b))

    def presign_put(self, key: str, expires_seconds: int, *, bucket: str | None = None) -> str:
        """A URL that lets whoever holds it PUT ``key`` (and nothing else) for ``expires_seconds``, signed with
        this store's credentials (SigV4 query string; nothing is sent). The source step's hand-over."""
        b = bucket or self.default_bucket
        return self._call(
            f"presign put s3://{b}/{key}",
            lambda: self._client.generate_presigned_url(
                "put_object", Params={"Bucket": b, "Key": key}, ExpiresIn=expires_seconds, HttpMethod="PUT"
            ),
        )
