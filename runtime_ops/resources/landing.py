"""Landing sources: one interface over a local folder and an S3 bucket/prefix.

The landing sensor scans keys in order, page by page, compares each page with its ledger (key + version)
and resumes the next scan from a cursor key. So both sources:

* stream pages in **UTF-8 binary key order** (the order of S3 ``ListObjectsV2``) and never hold the whole
  listing in memory: the local walk keeps one page plus the sorted entry names of the directories on the
  current path; the S3 listing keeps at most two S3 pages;
* resume with ``start_after`` (exclusive; the key need not exist any more);
* give every object a ``version`` that changes when its content is replaced (S3: the ETag; local:
  ``f"{size}-{mtime_ns}"``), and refuse to ``read`` an object that is no longer at the listed version.

Python compares ``str`` by code point, and UTF-8 byte order *is* code point order, so plain string
comparison is the S3 order for every valid key.

Only the standard library is imported at module level: ``dagster_aws.s3`` (boto3) costs seconds to import
and is imported on the first S3 call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "IGNORED_SUFFIXES",
    "LandingBucketMissing",
    "LandingError",
    "LandingSource",
    "LocalLandingSource",
    "ObjectChanged",
    "ObjectGone",
    "ObjectRef",
    "S3LandingSource",
    "is_ignored_key",
    "open_landing",
]

log = logging.getLogger(__name__)

SETTING = "RUNTIME_OPS_LANDING"
# Names of files still being written by common tools (curl/wget/rsync partials, browsers, our own temp).
IGNORED_SUFFIXES = (".tmp", ".part", ".crdownload")
S3_MAX_KEYS = 1000


@dataclass(frozen=True)
class ObjectRef:
    key: str  # relative to the landing root/prefix, POSIX separators
    version: str  # S3: the ETag without quotes; local: f"{size}-{mtime_ns}"
    size: int
    last_modified: datetime  # tz-aware UTC


class LandingError(Exception):
    """Base class of landing-source errors."""


class ObjectChanged(LandingError):
    """The object at ``key`` is no longer at the version that was listed."""

    def __init__(self, key: str, expected: str, found: str | None = None, detail: str = "") -> None:
        self.key, self.expected, self.found = key, expected, found
        now = repr(found) if found else "a newer version"
        msg = f"landing object {key!r} changed: listed at version {expected!r}, now at {now}"
        super().__init__(msg + (f" ({detail})" if detail else ""))


class ObjectGone(LandingError):
    """The object at ``key`` was deleted after it was listed."""

    def __init__(self, key: str, expected: str | None = None) -> None:
        self.key, self.expected = key, expected
        suffix = f" (listed at version {expected!r})" if expected else ""
        super().__init__(f"landing object {key!r} no longer exists{suffix}")


class LandingBucketMissing(LandingError):
    """The S3 bucket named by RUNTIME_OPS_LANDING does not exist (or is not visible to these credentials)."""


@runtime_checkable
class LandingSource(Protocol):
    uri: str  # e.g. "s3://bucket/prefix" or "/abs/path"

    def iter_pages(self, start_after: str | None = None, page_size: int = 1000) -> Iterator[list[ObjectRef]]:
        """Yield non-empty pages of at most ``page_size`` refs, keys strictly after ``start_after``,
        in UTF-8 binary order."""
        ...

    def read(self, ref: ObjectRef) -> bytes:
        """The object's bytes; ObjectChanged if it is no longer at ``ref.version``, ObjectGone if deleted."""
        ...

    def put(self, key: str, data: bytes) -> ObjectRef:
        """Write (atomically) and return the new ref."""
        ...


# ----------------------------------------------------------------------------------------------- helpers


def _is_ignored_name(name: str, *, is_file: bool) -> bool:
    if name.startswith("."):
        return True
    return is_file and name.endswith(IGNORED_SUFFIXES)


def is_ignored_key(key: str) -> bool:
    """True for keys the landing never reports: any dot-file/dot-dir segment, temp-file suffixes,
    directory markers (a trailing ``/``) and empty keys."""
    if not key or key.endswith("/"):
        return True
    parts = key.split("/")
    if any(p.startswith(".") for p in parts):
        return True
    return parts[-1].endswith(IGNORED_SUFFIXES)


def _check_key(key: str) -> str:
    """Validate a key for ``put``/``read``: relative, POSIX, no ``..``/empty segments, not ignored."""
    if not isinstance(key, str) or not key:
        raise ValueError("landing key must be a non-empty string")
    if key.startswith("/") or "\x00" in key or (os.sep == "\\" and "\\" in key):
        raise ValueError(f"landing key {key!r} must be relative with POSIX separators")
    parts = key.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"landing key {key!r} has an empty, '.' or '..' segment")
    if is_ignored_key(key):
        raise ValueError(
            f"landing key {key!r} would be ignored by the landing scan "
            f"(dot-file/dot-dir or a {'/'.join(IGNORED_SUFFIXES)} temp name)"
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"landing key {key!r} is not valid UTF-8") from exc
    return key


def _check_page_size(page_size: int) -> int:
    if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
        raise ValueError(f"page_size must be a positive int, got {page_size!r}")
    return page_size


def _pages(refs: Iterator[ObjectRef], page_size: int) -> Iterator[list[ObjectRef]]:
    page: list[ObjectRef] = []
    for ref in refs:
        page.append(ref)
        if len(page) >= page_size:
            yield page
            page = []
    if page:
        yield page


def _local_version(st: os.stat_result) -> str:
    return f"{st.st_size}-{st.st_mtime_ns}"


def _utc_from_ns(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


# ------------------------------------------------------------------------------------------ local folder


class _Frame:
    """One directory on the walk stack: its key prefix and its remaining entries, sorted.

    Entries are stored as plain strings, directories with a trailing ``/``: that string is both the
    sort key that yields the global UTF-8 order ("a.txt" < "a/" < "a0") and the directory marker.
    """

    __slots__ = ("entries", "path", "pos", "prefix", "real")

    def __init__(self, path: str, prefix: str, real: str, entries: list[str]) -> None:
        self.path, self.prefix, self.real, self.entries, self.pos = path, prefix, real, entries, 0


class LocalLandingSource:
    """A local folder. Keys are paths relative to the root with ``/`` separators."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        root = os.path.abspath(os.path.expanduser(os.fspath(root)))
        try:
            os.makedirs(root, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise LandingError(f"{SETTING} points at {root!r}, which exists and is not a folder") from exc
        except OSError as exc:
            raise LandingError(f"cannot create the landing folder {root!r} ({SETTING}): {exc}") from exc
        self.root = root
        self.uri = root
        self._real_root = os.path.realpath(root)

    def __repr__(self) -> str:
        return f"LocalLandingSource({self.root!r})"

    # -- listing

    def _inside_root(self, real: str) -> bool:
        return real == self._real_root or real.startswith(self._real_root.rstrip(os.sep) + os.sep)

    def _scan(self, path: str, prefix: str, ancestors: set[str], start_after: str | None) -> list[str]:
        """Sorted entries of one directory, pruned of ignored names, escaping/looping symlinks and
        everything that sorts at or before ``start_after``."""
        local_sa: str | None = None
        if start_after is not None and start_after.startswith(prefix):
            local_sa = start_after[len(prefix) :]
        # (If the cursor does not start with this directory's prefix, the directory sorts wholly after it:
        # we only descend into directories that are on the cursor's path or after it.)
        out: list[str] = []
        with os.scandir(path) as it:
            for entry in it:
                name = entry.name
                if name.startswith("."):
                    continue
                try:
                    name.encode("utf-8")
                except UnicodeEncodeError:
                    log.warning("landing: skipping %r: file name is not valid UTF-8", entry.path)
                    continue
                try:
                    is_dir = entry.is_dir()  # follows symlinks
                    if not is_dir and not entry.is_file():
                        continue  # fifo, socket, device, dangling symlink
                    if entry.is_symlink():
                        real = os.path.realpath(entry.path)
                        if not self._inside_root(real):
                            continue
                        if is_dir and real in ancestors:
                            continue  # a loop back into a directory already on the stack
                except OSError:
                    continue
                if is_dir:
                    sort_key = name + "/"
                    if local_sa is not None and sort_key <= local_sa and not local_sa.startswith(sort_key):
                        continue  # the whole subtree sorts before the cursor: never walk it
                else:
                    if name.endswith(IGNORED_SUFFIXES):
                        continue
                    sort_key = name
                    if local_sa is not None and sort_key <= local_sa:
                        continue
                out.append(sort_key)
        out.sort()
        return out

    def iter_refs(self, start_after: str | None = None) -> Iterator[ObjectRef]:
        """Every object after ``start_after``, one at a time, in global UTF-8 key order."""
        root_real = self._real_root
        stack = [_Frame(self.root, "", root_real, self._scan(self.root, "", {root_real}, start_after))]
        ancestors = {root_real}
        while stack:
            frame = stack[-1]
            if frame.pos >= len(frame.entries):
                stack.pop()
                ancestors.discard(frame.real)
                continue
            entry = frame.entries[frame.pos]
            frame.entries[frame.pos] = ""  # release names already walked
            frame.pos += 1
            if entry.endswith("/"):
                name = entry[:-1]
                path = os.path.join(frame.path, name)
                # Only a symlink can lead back to an ancestor (or outside the root): resolve just those.
                if os.path.islink(path):
                    real = os.path.realpath(path)
                    if real in ancestors or not self._inside_root(real):
                        continue
                else:
                    real = os.path.join(frame.real, name)
                prefix = frame.prefix + entry
                try:
                    entries = self._scan(path, prefix, ancestors | {real}, start_after)
                except FileNotFoundError:
                    continue  # removed since its parent was scanned
                except OSError as exc:
                    log.warning("landing: cannot list %r (%s); skipping it this scan", path, exc)
                    continue
                if entries:
                    stack.append(_Frame(path, prefix, real, entries))
                    ancestors.add(real)
                continue
            path = os.path.join(frame.path, entry)
            try:
                st = os.stat(path)
            except OSError:
                continue  # removed (or replaced by something unreadable) since the scan
            if not stat.S_ISREG(st.st_mode):
                continue
            yield ObjectRef(
                key=frame.prefix + entry,
                version=_local_version(st),
                size=st.st_size,
                last_modified=_utc_from_ns(st.st_mtime_ns),
            )

    def iter_pages(self, start_after: str | None = None, page_size: int = 1000) -> Iterator[list[ObjectRef]]:
        _check_page_size(page_size)
        return _pages(self.iter_refs(start_after), page_size)

    # -- objects

    def _path(self, key: str) -> str:
        _check_key(key)
        return os.path.join(self.root, *key.split("/"))

    def read(self, ref: ObjectRef) -> bytes:
        path = self._path(ref.key)
        if not self._inside_root(os.path.realpath(path)):
            raise ObjectGone(ref.key, ref.version)  # never listed: a symlink on its path escapes the root
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectGone(ref.key, ref.version) from None
        except IsADirectoryError:
            raise ObjectGone(ref.key, ref.version) from None
        with os.fdopen(fd, "rb") as fh:
            before = os.fstat(fh.fileno())
            if not stat.S_ISREG(before.st_mode):
                raise ObjectGone(ref.key, ref.version)
            if _local_version(before) != ref.version:
                raise ObjectChanged(ref.key, ref.version, _local_version(before))
            data = fh.read(ref.size + 1)  # one extra byte detects a file that grew under us
            after = os.fstat(fh.fileno())
        if len(data) != ref.size or _local_version(after) != ref.version:
            raise ObjectChanged(
                ref.key, ref.version, _local_version(after), detail=f"read {len(data)} of {ref.size} bytes"
            )
        return data

    def put(self, key: str, data: bytes) -> ObjectRef:
        """Atomic write: a hidden temp file in the target folder (ignored by the scan), then ``os.replace``.

        If the replaced file had the same size and an mtime at or after the new one (coarse timestamps),
        the new file's mtime is bumped so that its version differs and the overwrite is never missed.
        """
        path = self._path(key)
        directory, name = os.path.split(path)
        os.makedirs(directory, exist_ok=True)
        if not self._inside_root(os.path.realpath(directory)):
            raise ValueError(f"landing key {key!r} resolves outside the landing folder (symlink)")
        tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            st = os.stat(tmp)
            try:
                old = os.stat(path)
            except OSError:
                old = None
            if old is not None and old.st_size == st.st_size and st.st_mtime_ns <= old.st_mtime_ns:
                for step in (1_000, 1_000_000, 2_000_000_000):  # 1 µs, 1 ms, 2 s (FAT-class granularity)
                    os.utime(tmp, ns=(st.st_atime_ns, old.st_mtime_ns + step))
                    st = os.stat(tmp)
                    if st.st_mtime_ns > old.st_mtime_ns:
                        break
            os.replace(tmp, path)  # rename keeps the inode's mtime: `st` describes the final file
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return ObjectRef(
            key=key, version=_local_version(st), size=st.st_size, last_modified=_utc_from_ns(st.st_mtime_ns)
        )


# -------------------------------------------------------------------------------------------------- S3


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

    The client is built on first use, so constructing the source costs no boto3 import.
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
                    from dagster_aws.s3 import S3Resource  # ~3.5 s: only when S3 is actually used

                    from runtime_ops.observability.tracing import instrument_boto3_client

                    # A CLIENT span per S3 call (botocore event hooks), with the bucket, URL and status.
                    self._client = instrument_boto3_client(S3Resource(endpoint_url=self.endpoint_url).get_client())
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
        _check_page_size(page_size)
        return _pages(self.iter_refs(start_after, max_keys=page_size), page_size)

    # -- objects

    def _current_etag(self, full_key: str) -> str | None:
        try:
            return str(self.client.head_object(Bucket=self.bucket, Key=full_key)["ETag"]).strip('"')
        except Exception:
            return None

    def read(self, ref: ObjectRef) -> bytes:
        from botocore.exceptions import ClientError

        full = self.prefix + _check_key(ref.key)
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

    def put(self, key: str, data: bytes) -> ObjectRef:
        """A single PutObject (atomic in S3). ``last_modified`` comes from a HEAD of that exact ETag."""
        from botocore.exceptions import ClientError

        full = self.prefix + _check_key(key)
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


# ------------------------------------------------------------------------------------------------ factory


def open_landing(uri: str, *, endpoint_url: str | None = None) -> LandingSource:
    """``s3://bucket[/prefix]`` → :class:`S3LandingSource`; a path → :class:`LocalLandingSource`."""
    uri = os.fspath(uri)
    if not uri or not str(uri).strip():
        raise ValueError(f"{SETTING} is empty: use s3://bucket[/prefix] or a local folder path")
    if uri.startswith("s3://"):
        return S3LandingSource(uri, endpoint_url=endpoint_url)
    if "://" in uri:
        raise ValueError(f"{SETTING}={uri!r}: unsupported scheme; use s3://bucket[/prefix] or a local folder path")
    return LocalLandingSource(uri)
