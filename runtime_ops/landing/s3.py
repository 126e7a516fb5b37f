"""An S3 bucket (and optional prefix) as a landing source, through dagster-aws's ``S3Resource``.

Only the standard library is imported at module level: ``dagster_aws.s3`` (boto3) costs seconds to import
and is imported on the first S3 call. The listing holds at most two S3 pages; a version is the ETag.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from runtime_ops.landing.base import (
    SETTING,
    STASH_FOLDER,
    LandingBucketMissing,
    ObjectChanged,
    ObjectGone,
    ObjectRef,
    check_key,
    check_page_size,
    is_ignored_key,
    pages,
)
from runtime_ops.observability.tracing import instrument_boto3_client

S3_MAX_KEYS = 1000

# One client per endpoint, region and credentials for the life of the process: a sensor tick builds its landing
# source afresh, a boto3 client costs ~100 ms of CPU to build (service model, pydantic resource), and boto3 clients
# are thread-safe. The credentials enter the key only as a digest.
_CLIENTS: dict[tuple[str | None, str | None, str], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _shared_client(endpoint_url: str | None) -> Any:
    env = os.environ
    who = "\0".join(env.get(name, "") for name in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_SESSION_TOKEN"))
    key = (
        endpoint_url,
        env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
        hashlib.sha256(who.encode()).hexdigest(),
    )
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            from dagster_aws.s3 import S3Resource  # ~3.5 s: only when S3 is actually used

            # A CLIENT span per S3 call (botocore event hooks), with the bucket, URL and status.
            client = _CLIENTS[key] = instrument_boto3_client(S3Resource(endpoint_url=endpoint_url).get_client())
        return client


def _parse_s3_uri(uri: str) -> tuple[str, str]:
    rest = uri[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ValueError(f"{SETTING}={uri!r}: the s3:// URL has no bucket name; use s3://bucket[/prefix]")
    prefix = prefix.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return bucket, prefix


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _http_status(exc: Exception) -> int:
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


class S3LandingSource:
    """An S3 bucket (and optional prefix) through dagster-aws's ``S3Resource``.

    The client is built on first use (and shared per endpoint, region and credentials), so constructing the source
    costs no boto3 import.
    """

    def __init__(self, uri: str, *, endpoint_url: str | None = None, client: Any | None = None) -> None:
        if not uri.startswith("s3://"):
            raise ValueError(f"{SETTING}={uri!r} is not an s3:// URL")
        self.bucket, self.prefix = _parse_s3_uri(uri)
        self.uri = f"s3://{self.bucket}/{self.prefix.rstrip('/')}" if self.prefix else f"s3://{self.bucket}"
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        self._client = client
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"S3LandingSource({self.uri!r}, endpoint_url={self.endpoint_url!r})"

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = _shared_client(self.endpoint_url)
        return self._client

    def _missing_bucket(self, exc: Exception) -> LandingBucketMissing:
        where = f" at {self.endpoint_url}" if self.endpoint_url else ""
        return LandingBucketMissing(
            f"S3 bucket {self.bucket!r}{where} does not exist or is not accessible "
            f"(set by {SETTING}={self.uri!r}); create the bucket or fix {SETTING}"
            f" [{_error_code(exc) or _http_status(exc)}]"
        )

    def check(self) -> None:
        """Fail fast (LandingBucketMissing) when the bucket is missing; for start-up checks."""
        from botocore.exceptions import ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            missing = _error_code(exc) in ("404", "NoSuchBucket", "403", "AccessDenied")
            if missing or _http_status(exc) in (403, 404):
                raise self._missing_bucket(exc) from exc
            raise

    # -- listing

    def _list_responses(self, start_after: str | None, max_keys: int) -> Iterator[dict]:
        from botocore.exceptions import ClientError

        kwargs: dict[str, Any] = {"Bucket": self.bucket, "MaxKeys": max_keys}
        if self.prefix:
            kwargs["Prefix"] = self.prefix
        if start_after:
            kwargs["StartAfter"] = self.prefix + start_after
        while True:
            try:
                resp = self.client.list_objects_v2(**kwargs)
            except ClientError as exc:
                if _error_code(exc) == "NoSuchBucket":
                    raise self._missing_bucket(exc) from exc
                raise
            yield resp
            token = resp.get("NextContinuationToken")
            if not resp.get("IsTruncated") or not token:
                return
            kwargs["ContinuationToken"] = token

    def iter_refs(self, start_after: str | None = None, *, max_keys: int = S3_MAX_KEYS) -> Iterator[ObjectRef]:
        n = len(self.prefix)
        for resp in self._list_responses(start_after, max(1, min(max_keys, S3_MAX_KEYS))):
            for obj in resp.get("Contents", ()):
                full = obj["Key"]
                if not full.startswith(self.prefix):
                    continue
                key = full[n:]
                if is_ignored_key(key):
                    continue  # directory markers, dot-files, temp uploads
                yield ObjectRef(
                    key=key,
                    version=str(obj.get("ETag", "")).strip('"'),
                    size=int(obj.get("Size", 0)),
                    last_modified=obj["LastModified"].astimezone(UTC),
                )

    def iter_pages(self, start_after: str | None = None, page_size: int = 1000) -> Iterator[list[ObjectRef]]:
        """Pages of exactly ``page_size`` refs (the last may be shorter), re-packed from S3 pages of
        ``MaxKeys=page_size`` after dropping ignored keys; holds at most one S3 page plus one page."""
        check_page_size(page_size)
        return pages(self.iter_refs(start_after, max_keys=page_size), page_size)

    # -- objects

    def _current_etag(self, full_key: str) -> str | None:
        try:
            return str(self.client.head_object(Bucket=self.bucket, Key=full_key)["ETag"]).strip('"')
        except Exception:
            return None

    def read(self, ref: ObjectRef) -> bytes:
        from botocore.exceptions import ClientError

        full = self.prefix + check_key(ref.key)
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=full, IfMatch=f'"{ref.version}"')
        except ClientError as exc:
            code, status = _error_code(exc), _http_status(exc)
            if code in ("NoSuchKey", "404") or (status == 404 and code != "NoSuchBucket"):
                raise ObjectGone(ref.key, ref.version) from None
            if code == "PreconditionFailed" or status == 412:
                current = self._current_etag(full)
                if current is None:
                    raise ObjectGone(ref.key, ref.version) from None
                raise ObjectChanged(ref.key, ref.version, current) from None
            if code == "NoSuchBucket":
                raise self._missing_bucket(exc) from exc
            raise
        with resp["Body"] as body:
            data = body.read()
        if len(data) != ref.size:
            raise ObjectChanged(ref.key, ref.version, detail=f"read {len(data)} of {ref.size} bytes")
        return data

    def delete(self, key: str) -> bool:
        """A DeleteObject; S3 answers the same whether the key existed, so a HEAD first tells."""
        from botocore.exceptions import ClientError

        full = self.prefix + check_key(key)
        try:
            self.client.head_object(Bucket=self.bucket, Key=full)
        except ClientError as exc:
            if _http_status(exc) == 404:
                return False
            raise
        self.client.delete_object(Bucket=self.bucket, Key=full)
        return True

    # -- what the landing webhook's all-or-nothing writes need (`runtime_ops.landing.transaction`)

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self.prefix + check_key(key))
        except ClientError as exc:
            if _http_status(exc) == 404:
                return False
            raise
        return True

    def is_folder(self, key: str) -> bool:
        listed = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix + check_key(key) + "/", MaxKeys=1)
        return bool(listed.get("KeyCount"))

    def _stash_key(self, stash: str, key: str) -> str:
        return f"{self.prefix}{STASH_FOLDER}/{stash}/{check_key(key)}"

    def stash(self, key: str, stash: str) -> None:
        """Keep the current object of `key` aside (a server-side copy: nothing through this process)."""
        source = {"Bucket": self.bucket, "Key": self.prefix + check_key(key)}
        self.client.copy_object(Bucket=self.bucket, Key=self._stash_key(stash, key), CopySource=source)

    def unstash(self, stash: str, key: str) -> None:
        """Copy the stashed object back to `key` (the same bytes: the same ETag, so the same version)."""
        source = {"Bucket": self.bucket, "Key": self._stash_key(stash, key)}
        self.client.copy_object(Bucket=self.bucket, Key=self.prefix + check_key(key), CopySource=source)

    def discard(self, stash: str) -> None:
        prefix = f"{self.prefix}{STASH_FOLDER}/{stash}/"
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})

    def put(self, key: str, data: bytes) -> ObjectRef:
        """A single PutObject (atomic in S3). ``last_modified`` comes from a HEAD of that exact ETag."""
        from botocore.exceptions import ClientError

        full = self.prefix + check_key(key)
        try:
            resp = self.client.put_object(Bucket=self.bucket, Key=full, Body=data)
        except ClientError as exc:
            if _error_code(exc) == "NoSuchBucket":
                raise self._missing_bucket(exc) from exc
            raise
        etag = str(resp["ETag"]).strip('"')
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=full, IfMatch=f'"{etag}"')
            last_modified = head["LastModified"].astimezone(UTC)
        except ClientError:  # overwritten again already: the PUT's own time is the best we know
            last_modified = datetime.now(UTC).replace(microsecond=0)
        return ObjectRef(key=key, version=etag, size=len(data), last_modified=last_modified)
