"""Scoped API keys of the ops API: create (the key is returned once), verify, list, revoke.

A key is `rok_<8 hex>_<43 url-safe characters>`: `rok_<8 hex>` is its key id (public: logs, `keys list` and
`revoke` use it), the rest 32 random bytes. Only the SHA-256 of the whole key is stored: the secret has 256 bits
of entropy, so a slow password hash would add nothing but latency on every request. `verify` finds the row by key
id and compares digests with `hmac.compare_digest`.

Keys are process-wide (the API serves every pipeline), so this repository ignores the store's pipeline scope.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository

_K = t.api_keys
_BY_KEY_ID = select(_K).where(_K.c.key_id == bindparam("key_id"))  # built once: every API request reads it

# Every scope a key can carry. `admin` grants all the others.
SCOPES = ("read", "decide", "search", "admin")
ADMIN = "admin"

KEY_PREFIX = "rok_"
_KEY_ID = r"rok_[0-9a-f]{8}"
_KEY_RE = re.compile(rf"({_KEY_ID})_([A-Za-z0-9_\-]{{43}})")
_KEY_ID_RE = re.compile(_KEY_ID)
_BARE_ID_RE = re.compile(r"[0-9a-f]{8}")
# last_used_at is written at most this often per key: not a write per request.
LAST_USED_EVERY = timedelta(minutes=1)
MAX_NAME = 128
# Compared against when no row matches, so an unknown key id costs the same comparison as a known one.
_NO_DIGEST = "0" * 64


class UnknownScope(ValueError):
    """A scope that is not one of `SCOPES`; the message lists the valid ones."""


def parse_scopes(values: Iterable[str]) -> tuple[str, ...]:
    """The scopes named by `values` (each one scope or a comma-separated list), deduplicated, in `SCOPES` order.

    Raises `UnknownScope` for a name outside `SCOPES` and `ValueError` for none at all."""
    names = {s.strip().lower() for v in values for s in v.split(",") if s.strip()}
    unknown = sorted(names - set(SCOPES))
    if unknown:
        raise UnknownScope(f"unknown scope(s) {', '.join(unknown)}; valid scopes: {', '.join(SCOPES)}")
    if not names:
        raise ValueError(f"an API key needs at least one scope: {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in names)


def key_id_of(text: str) -> str | None:
    """The key id named by `text`: a whole key, its key id (`rok_ab12cd34`) or the bare 8 hex digits."""
    text = text.strip()
    if m := _KEY_RE.fullmatch(text):
        return m[1]
    if _KEY_ID_RE.fullmatch(text):
        return text
    if _BARE_ID_RE.fullmatch(text):
        return KEY_PREFIX + text
    return None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    """A key's public record (never its secret)."""

    key_id: str
    name: str
    scopes: tuple[str, ...]
    created_at: datetime
    created_by: str | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    approver: str | None = None  # the approver id the key decides as (None: it cannot decide)

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def label(self) -> str:
        """`name (key id)`, for log lines and audit records."""
        return f"{self.name} ({self.key_id})"

    def allows(self, scope: str) -> bool:
        return scope in self.scopes or ADMIN in self.scopes


@dataclass(frozen=True)
class NewKey:
    info: ApiKey
    key: str = field(repr=False)  # the whole key: the only time it exists outside its holder's hands


def _api_key(row: Mapping[Any, Any]) -> ApiKey:
    return ApiKey(
        key_id=row["key_id"],
        name=row["name"],
        scopes=tuple(s for s in row["scopes"].split(",") if s),
        created_at=row["created_at"],
        created_by=row["created_by"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
        revoked_by=row["revoked_by"],
        approver=row.get("approver"),
    )


class ApiKeys(Repository):
    def create(
        self,
        name: str,
        scopes: Iterable[str],
        *,
        created_by: str | None = None,
        approver: str | None = None,
        now: datetime | None = None,
    ) -> NewKey:
        """A new key named `name` with `scopes`, deciding as `approver` when given (it then needs the decide
        scope). The returned `NewKey.key` is the only copy of the key."""
        name = name.strip()
        if not name or len(name) > MAX_NAME:
            raise ValueError(f"an API key's name is 1 to {MAX_NAME} characters, got {name!r}")
        scope_list = parse_scopes(scopes)
        approver = approver.strip() if approver else None
        if approver is not None and not ({"decide", ADMIN} & set(scope_list)):
            raise ValueError(f"a key that decides as {approver!r} needs the decide scope (--scope decide)")
        if approver is not None and (len(approver) > 256 or not approver.isprintable()):
            raise ValueError(f"an approver id is 1 to 256 printable characters, got {approver!r}")
        now = now or utcnow()
        for _ in range(5):  # 32-bit key ids: a collision is rare, and retried with a fresh id
            key_id = KEY_PREFIX + secrets.token_hex(4)
            key = f"{key_id}_{secrets.token_urlsafe(32)}"
            row = {
                "key_id": key_id,
                "name": name,
                "secret_hash": _digest(key),
                "scopes": ",".join(scope_list),
                "created_at": now,
                "created_by": created_by[:128] if created_by else None,
                "approver": approver,
            }
            try:
                with self.tx() as conn:
                    conn.execute(insert(_K).values(**row))
            except IntegrityError:
                continue
            return NewKey(key=key, info=_api_key({**row, "last_used_at": None, "revoked_at": None, "revoked_by": None}))
        raise RuntimeError("could not allocate an unused API key id")

    def verify(self, key: str, *, now: datetime | None = None) -> ApiKey | None:
        """The key's record if `key` is a live (unrevoked) key, else None. Notes its use at most once a minute."""
        digest = _digest(key)
        m = _KEY_RE.fullmatch(key)
        if m is None:
            hmac.compare_digest(digest, _NO_DIGEST)
            return None
        # A standalone read: the write below is rare (once a minute a key) and guarded on its own.
        rows = self.fetch(_BY_KEY_ID, {"key_id": m[1]})
        row = rows[0]._mapping if rows else None
        matches = hmac.compare_digest(digest, row["secret_hash"] if row is not None else _NO_DIGEST)
        if row is None or not matches or row["revoked_at"] is not None:
            return None
        found = _api_key(row)
        now = now or utcnow()
        stale = now - LAST_USED_EVERY
        if found.last_used_at is None or found.last_used_at <= stale:
            with self.tx() as conn:  # guarded: of concurrent requests one writes, none regresses it
                conn.execute(
                    update(_K)
                    .where(and_(_K.c.id == row["id"], or_(_K.c.last_used_at.is_(None), _K.c.last_used_at <= stale)))
                    .values(last_used_at=now)
                )
            found = _api_key({**row, "last_used_at": now})
        return found

    def get(self, key_id: str) -> ApiKey | None:
        """The key named by `key_id` (a key id, its 8 hex digits or a whole key), revoked or not."""
        kid = key_id_of(key_id)
        if kid is None:
            return None
        with self.tx() as conn:
            row = conn.execute(select(_K).where(_K.c.key_id == kid)).mappings().first()
            return _api_key(row) if row is not None else None

    def list_keys(self, *, include_revoked: bool = True) -> list[ApiKey]:
        """Every key, oldest first."""
        q = select(_K).order_by(_K.c.created_at, _K.c.id)
        if not include_revoked:
            q = q.where(_K.c.revoked_at.is_(None))
        with self.tx() as conn:
            return [_api_key(r) for r in conn.execute(q).mappings()]

    def revoke(self, key_id: str, *, by: str | None = None, now: datetime | None = None) -> ApiKey | None:
        """Revoke the key named by `key_id` (see `get`); the record afterwards, None when there is no such key.

        Revoking a revoked key changes nothing (it keeps its first revocation)."""
        kid = key_id_of(key_id)
        if kid is None:
            return None
        with self.tx() as conn:
            conn.execute(
                update(_K)
                .where(and_(_K.c.key_id == kid, _K.c.revoked_at.is_(None)))
                .values(revoked_at=now or utcnow(), revoked_by=by[:128] if by else None)
            )
            row = conn.execute(select(_K).where(_K.c.key_id == kid)).mappings().first()
            return _api_key(row) if row is not None else None
