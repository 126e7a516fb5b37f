"""A local folder as a landing source. Keys are paths relative to the root with ``/`` separators.

The walk keeps one page plus the sorted entry names of the directories on the current path, so a folder of
millions of files is listed in bounded memory; a version is ``f"{size}-{mtime_ns}"``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

from runtime_ops.landing.base import (
    IGNORED_SUFFIXES,
    SETTING,
    STASH_FOLDER,
    LandingError,
    ObjectChanged,
    ObjectGone,
    ObjectRef,
    check_key,
    check_page_size,
    pages,
)

log = logging.getLogger(__name__)


def _local_version(st: os.stat_result) -> str:
    return f"{st.st_size}-{st.st_mtime_ns}"


def _utc_from_ns(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


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
        check_page_size(page_size)
        return pages(self.iter_refs(start_after), page_size)

    # -- objects

    def _path(self, key: str) -> str:
        check_key(key)
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

    def delete(self, key: str) -> bool:
        path = self._path(key)
        if not self._inside_root(os.path.realpath(os.path.dirname(path))):
            raise ValueError(f"landing key {key!r} resolves outside the landing folder (symlink)")
        try:
            os.remove(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    # -- what the landing webhook's all-or-nothing writes need (`runtime_ops.landing.transaction`)

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._path(key))

    def is_folder(self, key: str) -> bool:
        return os.path.isdir(self._path(key))

    def _stash_path(self, stash: str, key: str) -> str:
        return os.path.join(self.root, STASH_FOLDER, stash, *check_key(key).split("/"))

    def stash(self, key: str, stash: str) -> None:
        """Keep the current object of `key` aside (a hard link: no copy, its mtime and so its version kept)."""
        target = self._stash_path(stash, key)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.link(self._path(key), target)

    def unstash(self, stash: str, key: str) -> None:
        """Put the stashed object back at `key` (a rename: the same file, the same version as before)."""
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.replace(self._stash_path(stash, key), path)

    def discard(self, stash: str) -> None:
        shutil.rmtree(os.path.join(self.root, STASH_FOLDER, stash), ignore_errors=True)

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
