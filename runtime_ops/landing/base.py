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
# Where the landing webhook keeps the objects it replaces until its request is whole (a dot-folder: never scanned).
STASH_FOLDER = ".runtime_ops_stash"
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


class UnsafePath(LandingError):
    """A local landing refuses the key: a symbolic link is on its path, or it names something that is neither a
    regular file nor a folder. Nothing was read, made or written (`runtime_ops.landing.confined`)."""

    def __init__(self, key: str, reason: str) -> None:
        self.key, self.reason = key, reason
        super().__init__(
            f"landing key {key!r} is refused: {reason}; the landing folder follows no symbolic links and holds "
            "only regular files and folders (use a key under a real folder)"
        )


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
        """The object's bytes; ObjectChanged if it is no longer at ``ref.version``, ObjectGone if deleted,
        UnsafePath if its path now crosses a symbolic link or names a special file (a local landing)."""
        ...

    def put(self, key: str, data: bytes) -> ObjectRef:
        """Write (atomically) and return the new ref."""
        ...

    def delete(self, key: str) -> bool:
        """Remove the object; False when there was none."""
        ...

    def exists(self, key: str) -> bool:
        """An object is at `key` (UnsafePath: a local landing will not follow its path)."""
        ...

    def is_folder(self, key: str) -> bool:
        """Objects are under `key/` (UnsafePath: a local landing will not follow its path)."""
        ...

    def stash(self, key: str, stash: str) -> None:
        """Keep the object at `key` aside under the stash `stash` (ignored by the scan)."""
        ...

    def unstash(self, stash: str, key: str) -> None:
        """Put the object stashed for `key` back, at the version it had."""
        ...

    def discard(self, stash: str) -> None:
        """Remove the stash `stash` and everything in it."""
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


# What every landing accepts (the strictest of S3's and a POSIX folder's rules, so a key that lands in one lands in
# the other): a key of at most 1,024 UTF-8 bytes, segments of at most 255.
MAX_KEY_BYTES = 1024
MAX_SEGMENT_BYTES = 255


def check_key(key: str) -> str:
    """Validate a key for ``put``/``read``: relative, POSIX, no ``..``/empty segments, not ignored, no control
    characters, within the length limits."""
    if not isinstance(key, str) or not key:
        raise ValueError("landing key must be a non-empty string")
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise ValueError(f"landing key {key!r} contains a control character (NUL, newline, ...)")
    if key.startswith("/") or (os.sep == "\\" and "\\" in key):
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
        encoded = key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"landing key {key!r} is not valid UTF-8") from exc
    if len(encoded) > MAX_KEY_BYTES:
        raise ValueError(f"landing key {key[:60]!r}... is {len(encoded)} bytes long (at most {MAX_KEY_BYTES})")
    long = [p for p in parts if len(p.encode("utf-8")) > MAX_SEGMENT_BYTES]
    if long:
        raise ValueError(
            f"landing key {key[:60]!r}... has a segment of {len(long[0].encode())} bytes (at most {MAX_SEGMENT_BYTES})"
        )
    return key


def key_conflicts(keys: list[str]) -> list[str]:
    """What stops these keys from landing together: a key given twice, or a key that is a folder of another
    (``a`` and ``a/b``: a folder landing cannot hold both, and S3 listings would mix them). Pure."""
    from collections import Counter

    counts = Counter(keys)
    problems = [f"{k!r} is given more than once" for k in sorted(k for k, n in counts.items() if n > 1)]
    for k in sorted(counts):
        parts = k.split("/")
        problems += [
            f"{parent!r} is a file but {k!r} needs it to be a folder"
            for parent in ("/".join(parts[:i]) for i in range(1, len(parts)))
            if parent in counts
        ]
    return problems


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
