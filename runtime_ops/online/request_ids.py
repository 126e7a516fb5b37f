"""Request ids of `/api/search` and `/api/answer`: `q_` + 26 Crockford base32 characters, ULID-like.

The first 10 characters encode the millisecond the id was issued, the other 16 are random (80 bits). So the
feedback route can tell from the id alone, without a database read, a request that is older than retention (410
expired) from one younger than the query log's flush interval (409: not written yet, retry), and ids sort by time.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

PREFIX = "q_"
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32: no I, L, O, U
_VALUE = {c: i for i, c in enumerate(_ALPHABET)}
_TIME_CHARS, _RANDOM_CHARS = 10, 16
PATTERN = re.compile(rf"^{PREFIX}[{_ALPHABET}]{{{_TIME_CHARS + _RANDOM_CHARS}}}$")
LENGTH = len(PREFIX) + _TIME_CHARS + _RANDOM_CHARS


def _encode(value: int, chars: int) -> str:
    out = []
    for _ in range(chars):
        value, digit = divmod(value, 32)
        out.append(_ALPHABET[digit])
    return "".join(reversed(out))


def new_request_id(now: datetime) -> str:
    """A fresh id issued at `now` (timezone-aware)."""
    millis = int(now.timestamp() * 1000)
    if not 0 <= millis < 32**_TIME_CHARS:
        raise ValueError(f"{now.isoformat()} cannot be encoded in a request id")
    return PREFIX + _encode(millis, _TIME_CHARS) + _encode(secrets.randbits(5 * _RANDOM_CHARS), _RANDOM_CHARS)


def is_request_id(text: str) -> bool:
    return bool(PATTERN.match(text))


def issued_at(request_id: str) -> datetime:
    """When `request_id` was issued (UTC, to the millisecond); ValueError for anything that is not a request id."""
    if not is_request_id(request_id):
        raise ValueError(
            f"{request_id[:40]!r} is not a request id: expected {PREFIX} and 26 characters, as returned by "
            "/api/search or /api/answer"
        )
    millis = 0
    for char in request_id[len(PREFIX) : len(PREFIX) + _TIME_CHARS]:
        millis = millis * 32 + _VALUE[char]
    return datetime.fromtimestamp(millis / 1000, tz=UTC)
