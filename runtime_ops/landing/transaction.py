"""Writing several landing objects (and deleting some) as one change: all of them, or none.

A landing is a folder or a bucket: neither has transactions. So every key is checked first (the landing's own
key rules, duplicates, a key that is another's folder, a key whose folder is a file or that names a folder in
the landing, a key whose path a local landing will not follow), then the objects about to be replaced or deleted
are stashed aside (a hard link or a server-side copy, kept in a dot-folder the scan never lists), and only then
are the writes made. If one
fails, what was written is undone - new keys deleted, replaced or deleted ones put back from the stash at the
version they had, so the landing sensor sees no change - and the error is raised. The stash is discarded at
the end either way.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from runtime_ops.faults import failpoint
from runtime_ops.landing.base import LandingSource, ObjectRef, UnsafePath, check_key, key_conflicts


class RefusedKeys(ValueError):
    """Keys that cannot land (each problem named); nothing was written."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass
class Written:
    landed: list[ObjectRef] = field(default_factory=list)
    deleted: list[tuple[str, bool]] = field(default_factory=list)  # (key, an object was there)


def check_request(source: LandingSource, puts: list[str], deletes: list[str]) -> tuple[list[str], set[str]]:
    """Every reason these writes cannot all happen (empty: they can), and which of the keys hold an object now."""
    problems: list[str] = []
    for key in [*puts, *deletes]:
        try:
            check_key(key)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        return problems, set()
    problems += key_conflicts([*puts, *deletes])
    if problems:
        return problems, set()
    existing: set[str] = set()
    writes = set(puts)
    for key in [*puts, *deletes]:
        try:
            # First the key itself: a local landing walks its whole path, so a link on the way is named here.
            if source.exists(key):
                existing.add(key)
            if key not in writes:
                continue
            parts = key.split("/")
            files = [p for p in ("/".join(parts[:i]) for i in range(1, len(parts))) if source.exists(p)]
            if files:
                problems.append(f"{files[0]!r} is a file in the landing but {key!r} needs it to be a folder")
            if source.is_folder(key):
                problems.append(f"{key!r} is a folder in the landing")
        except UnsafePath as exc:
            problems.append(str(UnsafePath(key, exc.reason)))
    return problems, existing


def write_all(source: LandingSource, puts: list[tuple[str, bytes]], deletes: list[str]) -> Written:
    """Land `puts` and delete `deletes` together, or change nothing (RefusedKeys before any write; the write's
    own error after undoing the others, UnsafePath among them when a link appeared on a key's path since)."""
    problems, existing = check_request(source, [k for k, _ in puts], deletes)
    if problems:
        raise RefusedKeys(problems)
    stash = f"{uuid.uuid4().hex}"
    stashed: set[str] = set()
    done: list[str] = []
    out = Written()
    try:
        for key in [*(k for k, _ in puts), *deletes]:
            if key in existing:
                source.stash(key, stash)
                stashed.add(key)
        for key, data in puts:
            done.append(key)
            out.landed.append(source.put(key, data))
            failpoint("landing.write")  # after a write: a fault test checks the undo
        for key in deletes:
            done.append(key)
            out.deleted.append((key, source.delete(key)))
    except BaseException:
        for key in reversed(done):
            if key in stashed:
                source.unstash(stash, key)
            else:
                source.delete(key)
        raise
    finally:
        source.discard(stash)
    return out
