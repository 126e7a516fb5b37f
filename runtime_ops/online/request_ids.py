"""Request ids: `q_` + 26 characters, ULID-like: the first 10 encode the millisecond the id was issued (Crockford
base32), the other 16 are random. The time in the id tells an expired request from one too new to be written yet
without a database read; the random part seeds what a request draws (its interleaving's coin), so a logged request's
list can be rebuilt."""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime

PREFIX = "q_"
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: no I, L, O, U


def _encode(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        out.append(_ALPHABET[digit])
    return "".join(reversed(out))


def new_request_id(now_ms: int | None = None) -> str:
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return PREFIX + _encode(ms, 10) + _encode(secrets.randbits(80), 16)


def issued_at(request_id: str) -> datetime:
    """When `request_id` was issued (ValueError: not a request id)."""
    body = request_id.removeprefix(PREFIX)
    if not request_id.startswith(PREFIX) or len(body) != 26 or any(c not in _ALPHABET for c in body):
        raise ValueError(f"{request_id!r} is not a request id (q_ and 26 Crockford base32 characters)")
    ms = 0
    for c in body[:10]:
        ms = ms * 32 + _ALPHABET.index(c)
    return datetime.fromtimestamp(ms / 1000, UTC)
