"""A folder nothing under it can lead out of: every path is walked from an open handle on the folder, one name at
a time, following no symbolic link.

Resolving a path and then opening it by name is a race (the path can be swapped for a link in between), and making
the folders of a path before checking it makes them wherever a link points. So no path below the root is ever
opened by name from the root: each step opens the next folder relative to the handle of the one before with
``O_NOFOLLOW | O_DIRECTORY``, folders are made with ``mkdir(dir_fd=)``, files are opened with ``O_NOFOLLOW``, and a
file is written under a temporary name and renamed within its folder's handle. A symbolic link anywhere on the way,
or anything that is neither a regular file nor a folder, raises `Refused` before anything is read, made or
written. (Linux's ``openat2(RESOLVE_BENEATH)`` does the walk in one call, but the standard library does not wrap
it.) The root itself is opened by its path: it is the operator's setting, links and all.

Pure of Dagster; `runtime_ops.landing.local` keeps its files here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence

# O_NONBLOCK: opening a FIFO swapped in for a file or folder must not wait for a writer (a regular file ignores it).
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_BINARY", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_BINARY", 0)
# What open(O_NOFOLLOW) answers for a symbolic link: ELOOP on Linux, EMLINK on the BSDs.
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK})

Parts = Sequence[str]


class Refused(Exception):
    """A path the folder will not follow: a symbolic link on the way, or something neither a file nor a folder."""

    def __init__(self, at: str, what: str) -> None:
        self.at, self.what = at, what
        self.reason = f"{at!r} is {what}"
        super().__init__(self.reason)


def kind_of(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def _where(parts: Parts) -> str:
    return "/".join(parts)


def _check_name(name: str) -> None:
    # The callers' key rules already refuse these; the walk must not depend on them.
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a single path component: {name!r}")


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """The entry `name` of the folder `dir_fd` itself (a link is not followed), or None when there is none."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def open_folder_at(dir_fd: int, name: str, *, where: str | None = None, create: bool = False) -> int:
    """A handle on the folder `name` of the folder `dir_fd`, made first if `create` and missing.

    FileNotFoundError when missing, NotADirectoryError when it is a regular file, `Refused` when it is a link or
    anything else (`where` names it in the message: its path from the root)."""
    _check_name(name)
    where = where or name
    for _ in range(3):  # made, then removed by someone else before we opened it: try again, then give up
        try:
            return os.open(name, _FOLDER, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):  # made by a concurrent writer: open it
                os.mkdir(name, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno != errno.ENOTDIR and exc.errno not in _LINK_ERRNOS:
                raise
            st = lstat_at(dir_fd, name)
            if st is None:
                continue  # gone since: look again
            if stat.S_ISREG(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, f"{where!r} is a file, not a folder") from None
            if stat.S_ISDIR(st.st_mode):
                continue  # a folder again since: look again
            raise Refused(where, kind_of(st.st_mode)) from None
    raise FileNotFoundError(errno.ENOENT, f"{where!r} keeps disappearing while it is opened")


class ConfinedFolder:
    """The files and folders below `root`, reached only through handles (see the module's docstring).

    A path is a sequence of names (no separators, no ``.``/``..``); the root is the empty sequence."""

    def __init__(self, root: str) -> None:
        self.root = root

    def open_root(self) -> int:
        return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    @contextlib.contextmanager
    def folder(self, parts: Parts, *, create: bool = False) -> Iterator[int]:
        """A handle on the folder `parts` (closed on exit), its missing folders made if `create`."""
        fd = self.open_root()
        try:
            for i, name in enumerate(parts):
                child = open_folder_at(fd, name, where=_where(parts[: i + 1]), create=create)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def lstat(self, parts: Parts) -> os.stat_result | None:
        """The entry at `parts` itself, or None when it (or a folder on its way) is missing or a folder on its way
        is a file; `Refused` for a link or special file on the way."""
        try:
            with self.folder(parts[:-1]) as d:
                return lstat_at(d, parts[-1])
        except (FileNotFoundError, NotADirectoryError):
            return None

    def open_file(self, parts: Parts) -> int:
        """A read handle on the regular file at `parts`. FileNotFoundError / NotADirectoryError when missing,
        IsADirectoryError for a folder, `Refused` for a link or special file at or on the way to `parts`."""
        with self.folder(parts[:-1]) as d:
            try:
                fd = os.open(parts[-1], _READ, dir_fd=d)
            except OSError as exc:
                if exc.errno not in _LINK_ERRNOS and exc.errno != errno.ENXIO:  # ENXIO: a socket
                    raise
                st = lstat_at(d, parts[-1])
                if st is None:
                    raise FileNotFoundError(errno.ENOENT, f"{_where(parts)!r} is gone") from None
                raise Refused(_where(parts), kind_of(st.st_mode)) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, f"{_where(parts)!r} is a folder")
            raise Refused(_where(parts), kind_of(st.st_mode))
        return fd

    def write_file(
        self,
        parts: Parts,
        data: bytes,
        prepare: Callable[[int, os.stat_result, os.stat_result | None], os.stat_result] | None = None,
    ) -> os.stat_result:
        """Write `data` at `parts` atomically (a hidden temporary file in the same folder, fsynced, then renamed
        over the name), making missing folders. `prepare(fd, new, old)` may adjust the new file before it
        appears (`old`: the file it replaces, if any) and returns its stat. Returns the final file's stat.
        `Refused` when the name (or a folder on the way) is a link or special file; IsADirectoryError for a
        folder."""
        name = parts[-1]
        _check_name(name)
        with self.folder(parts[:-1], create=True) as d:
            old = lstat_at(d, name)
            if old is not None and not stat.S_ISREG(old.st_mode):
                if stat.S_ISDIR(old.st_mode):
                    raise IsADirectoryError(errno.EISDIR, f"{_where(parts)!r} is a folder")
                raise Refused(_where(parts), kind_of(old.st_mode))
            # A short name: `name` itself may be 255 bytes, the longest a file name can be.
            tmp = f".{uuid.uuid4().hex}.tmp"
            fd = os.open(tmp, _CREATE, 0o666, dir_fd=d)
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                    st = os.fstat(fd)
                    if prepare is not None:
                        st = prepare(fd, st, old)
                finally:
                    os.close(fd)
                os.rename(tmp, name, src_dir_fd=d, dst_dir_fd=d)  # the inode's mtime is kept: `st` holds
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=d)
                raise
        return st

    def unlink(self, parts: Parts) -> bool:
        """Remove the regular file at `parts`; False when there is none (or a folder is there). `Refused` for a
        link or special file at or on the way to `parts`."""
        try:
            with self.folder(parts[:-1]) as d:
                st = lstat_at(d, parts[-1])
                if st is None or stat.S_ISDIR(st.st_mode):
                    return False
                if not stat.S_ISREG(st.st_mode):
                    raise Refused(_where(parts), kind_of(st.st_mode))
                os.unlink(parts[-1], dir_fd=d)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def link(self, src: Parts, dst: Parts) -> None:
        """A hard link at `dst` (its folders made) to the file at `src` (a link at `src` is linked, not followed)."""
        with self.folder(src[:-1]) as s, self.folder(dst[:-1], create=True) as d:
            os.link(src[-1], dst[-1], src_dir_fd=s, dst_dir_fd=d, follow_symlinks=False)

    def rename(self, src: Parts, dst: Parts) -> None:
        """Move the entry at `src` to `dst` (its folders made), replacing what is there."""
        with self.folder(src[:-1]) as s, self.folder(dst[:-1], create=True) as d:
            os.rename(src[-1], dst[-1], src_dir_fd=s, dst_dir_fd=d)

    def remove_tree(self, parts: Parts) -> None:
        """Remove the folder `parts` and everything in it (links in it are removed, never followed); no error
        when it is missing."""
        with contextlib.suppress(FileNotFoundError, NotADirectoryError, Refused), self.folder(parts[:-1]) as d:
            # shutil's fd-based walk (used where dir_fd is supported, as here) never follows a link.
            shutil.rmtree(parts[-1], dir_fd=d, ignore_errors=True)
