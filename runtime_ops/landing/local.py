"""A local folder as a landing source. Keys are paths relative to the root with ``/`` separators.

Every read, write, delete, stat and listing goes through `runtime_ops.landing.confined`: paths are walked from an
open handle on the root, one name at a time, following no symbolic link, so nothing outside the root is ever
read, made or written, whatever is swapped in while we look. A link in the folder is not listed; a key whose
path crosses one (or names a FIFO, socket or device) raises `UnsafePath`.

The walk keeps one page plus, for the directories on the current path, an open handle and their sorted entry
names, so a folder of millions of files is listed in bounded memory; a version is ``f"{size}-{mtime_ns}"``.
"""

from __future__ import annotations

import logging
import os
import stat
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
    UnsafePath,
    check_key,
    check_page_size,
    pages,
)
from runtime_ops.landing.confined import ConfinedFolder, Refused, kind_of, open_folder_at

log = logging.getLogger(__name__)


def _local_version(st: os.stat_result) -> str:
    return f"{st.st_size}-{st.st_mtime_ns}"


def _utc_from_ns(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _parts(key: str) -> list[str]:
    return check_key(key).split("/")


def _newer_than_replaced(fd: int, new: os.stat_result, old: os.stat_result | None) -> os.stat_result:
    """If the replaced file had the same size and an mtime at or after the new one (coarse timestamps), bump the
    new file's mtime so that its version differs and the overwrite is never missed."""
    if old is None or old.st_size != new.st_size or new.st_mtime_ns > old.st_mtime_ns:
        return new
    for step in (1_000, 1_000_000, 2_000_000_000):  # 1 µs, 1 ms, 2 s (FAT-class granularity)
        os.utime(fd, ns=(new.st_atime_ns, old.st_mtime_ns + step))
        new = os.fstat(fd)
        if new.st_mtime_ns > old.st_mtime_ns:
            break
    return new


class _Frame:
    """One directory on the walk stack: an open handle on it, its key prefix and its remaining entries, sorted.

    Entries are stored as plain strings, directories with a trailing ``/``: that string is both the
    sort key that yields the global UTF-8 order ("a.txt" < "a/" < "a0") and the directory marker.
    """

    __slots__ = ("entries", "fd", "pos", "prefix")

    def __init__(self, fd: int, prefix: str, entries: list[str]) -> None:
        self.fd, self.prefix, self.entries, self.pos = fd, prefix, entries, 0


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
        self._folder = ConfinedFolder(root)

    def __repr__(self) -> str:
        return f"LocalLandingSource({self.root!r})"

    # -- listing

    def _scan(self, fd: int, prefix: str, start_after: str | None) -> list[str]:
        """Sorted entries of one directory, pruned of ignored names, links, special files and everything that
        sorts at or before ``start_after``."""
        local_sa: str | None = None
        if start_after is not None and start_after.startswith(prefix):
            local_sa = start_after[len(prefix) :]
        # (If the cursor does not start with this directory's prefix, the directory sorts wholly after it:
        # we only descend into directories that are on the cursor's path or after it.)
        out: list[str] = []
        with os.scandir(fd) as it:
            for entry in it:
                name = entry.name
                if name.startswith("."):
                    continue
                try:
                    name.encode("utf-8")
                except UnicodeEncodeError:
                    log.warning("landing: skipping %r: file name is not valid UTF-8", prefix + name)
                    continue
                try:
                    # Links are never followed (nor listed): what they point at is not the landing's to read.
                    if entry.is_dir(follow_symlinks=False):
                        is_dir = True
                    elif entry.is_file(follow_symlinks=False):
                        is_dir = False
                    else:
                        continue  # a link, fifo, socket or device
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
        stack: list[_Frame] = []
        try:
            root_fd = self._folder.open_root()
            stack.append(_Frame(root_fd, "", []))
            stack[0].entries = self._scan(root_fd, "", start_after)
            while stack:
                frame = stack[-1]
                if frame.pos >= len(frame.entries):
                    stack.pop()
                    os.close(frame.fd)
                    continue
                entry = frame.entries[frame.pos]
                frame.entries[frame.pos] = ""  # release names already walked
                frame.pos += 1
                if entry.endswith("/"):
                    prefix = frame.prefix + entry
                    try:
                        fd = open_folder_at(frame.fd, entry[:-1], where=prefix[:-1])
                    except (OSError, Refused):
                        continue  # removed, or replaced by a file or a link, since its parent was scanned
                    try:
                        entries = self._scan(fd, prefix, start_after)
                    except OSError as exc:
                        os.close(fd)
                        log.warning("landing: cannot list %r (%s); skipping it this scan", prefix, exc)
                        continue
                    if entries:
                        stack.append(_Frame(fd, prefix, entries))
                    else:
                        os.close(fd)
                    continue
                try:
                    st = os.stat(entry, dir_fd=frame.fd, follow_symlinks=False)
                except OSError:
                    continue  # removed since the scan
                if not stat.S_ISREG(st.st_mode):
                    continue  # replaced by a link or something unreadable since the scan
                yield ObjectRef(
                    key=frame.prefix + entry,
                    version=_local_version(st),
                    size=st.st_size,
                    last_modified=_utc_from_ns(st.st_mtime_ns),
                )
        finally:
            for frame in stack:
                os.close(frame.fd)

    def iter_pages(self, start_after: str | None = None, page_size: int = 1000) -> Iterator[list[ObjectRef]]:
        check_page_size(page_size)
        return pages(self.iter_refs(start_after), page_size)

    # -- objects

    def read(self, ref: ObjectRef) -> bytes:
        try:
            fd = self._folder.open_file(_parts(ref.key))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectGone(ref.key, ref.version) from None
        except Refused as exc:
            raise UnsafePath(ref.key, exc.reason) from None
        with os.fdopen(fd, "rb") as fh:
            before = os.fstat(fh.fileno())
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
        try:
            return self._folder.unlink(_parts(key))
        except Refused as exc:
            raise UnsafePath(key, exc.reason) from None

    # -- what the landing webhook's all-or-nothing writes need (`runtime_ops.landing.transaction`)

    def _lstat(self, key: str) -> os.stat_result | None:
        try:
            return self._folder.lstat(_parts(key))
        except Refused as exc:
            raise UnsafePath(key, exc.reason) from None

    def exists(self, key: str) -> bool:
        st = self._lstat(key)
        if st is None or stat.S_ISDIR(st.st_mode):
            return False
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(key, f"{key!r} is {kind_of(st.st_mode)}")
        return True

    def is_folder(self, key: str) -> bool:
        st = self._lstat(key)
        if st is not None and not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
            raise UnsafePath(key, f"{key!r} is {kind_of(st.st_mode)}")
        return st is not None and stat.S_ISDIR(st.st_mode)

    @staticmethod
    def _stash_parts(stash: str, key: str) -> list[str]:
        return [STASH_FOLDER, stash, *_parts(key)]

    def stash(self, key: str, stash: str) -> None:
        """Keep the current object of `key` aside (a hard link: no copy, its mtime and so its version kept)."""
        self._folder.link(_parts(key), self._stash_parts(stash, key))

    def unstash(self, stash: str, key: str) -> None:
        """Put the stashed object back at `key` (a rename: the same file, the same version as before)."""
        self._folder.rename(self._stash_parts(stash, key), _parts(key))

    def discard(self, stash: str) -> None:
        self._folder.remove_tree([STASH_FOLDER, stash])

    def put(self, key: str, data: bytes) -> ObjectRef:
        """Atomic write: a hidden temp file in the target folder (ignored by the scan), then a rename over the key.

        A replaced file of the same size and an mtime at or after the new one's makes the new file's mtime move
        past it, so that its version differs and the overwrite is never missed.
        """
        try:
            st = self._folder.write_file(_parts(key), data, _newer_than_replaced)
        except Refused as exc:
            raise UnsafePath(key, exc.reason) from None
        return ObjectRef(
            key=key, version=_local_version(st), size=st.st_size, last_modified=_utc_from_ns(st.st_mtime_ns)
        )
