"""The landing interface: what a landing source lists (``ObjectRef``), the rules every source shares (which keys
are ignored, which keys may be written) and the errors a caller can act on.

The landing sensor scans keys in order, page by page, compares each page with its ledger (key + version)
and resumes the next scan from a cursor key. So every source:

* streams pages in **UTF-8 binary key order** (the order of S3 ``ListObjectsV2``) and never holds the whole
  listing in memory;
* resumes with ``start_after`` (exclusive; the key need not exist any more);
* gives every object a ``version`` that changes when its content is replaced, and refuses to ``read`` an
  object that is no longer at the listed version.

Python compares ``str`` by code point, and UTF-8 byte order *is* code point order, so plain string
comparison is the S3 order for every valid key.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

SETTING = "RUNTIME_OPS_LANDING"
# Names of files still being written by common tools (curl/wget/rsync partials, browsers, our own temp).
IGNORED_SUFFIXES = (".tmp", ".part", ".crdownload")


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

    def delete(self, key: str) -> bool:
        """Remove the object; False when there was none."""
        ...


# ----------------------------------------------------------------------------------------------- key rules


def is_ignored_key(key: str) -> bool:
    """True for keys the landing never reports: any dot-file/dot-dir segment, temp-file suffixes,
    directory markers (a trailing ``/``) and empty keys."""
    if not key or key.endswith("/"):
        return True
    parts = key.split("/")
    if any(p.startswith(".") for p in parts):
        return True
    return parts[-1].endswith(IGNORED_SUFFIXES)


def check_key(key: str) -> str:
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


def check_page_size(page_size: int) -> int:
    if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
        raise ValueError(f"page_size must be a positive int, got {page_size!r}")
    return page_size


def pages(refs: Iterator[ObjectRef], page_size: int) -> Iterator[list[ObjectRef]]:
    page: list[ObjectRef] = []
    for ref in refs:
        page.append(ref)
        if len(page) >= page_size:
            yield page
            page = []
    if page:
        yield page
