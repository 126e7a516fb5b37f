"""What the query log keeps instead of what a caller sent: the query's hash, and a session's keyed hash.

A query is hashed after normalisation (Unicode NFKC, case-folded, whitespace collapsed), so "How do I  Export?" and
"how do i export?" count as one query across requests whatever `queries.log` keeps. The hash is a plain SHA-256:
it lets equal queries be grouped, not hidden (a short query can be guessed by hashing candidates; `log: off` keeps
no text, and only the hash is kept for grouping).

A caller's `session` is an opaque string of theirs (a cookie, a user id): it is kept only as HMAC-SHA256 under a
key derived from the ops API's link secret, so the log never holds the value and nobody without the secret can
test a guess against it. Rotating RUNTIME_OPS_LINK_SECRET therefore starts new session hashes.
"""

from __future__ import annotations

import hashlib
import hmac
import unicodedata

# Distinguishes this key from every other use of the link secret (the links themselves are signed with it).
_SESSION_CONTEXT = b"runtime_ops query log session v1"


def normalise_query(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def query_hash(text: str) -> str:
    """SHA-256 (hex) of the normalised query."""
    return hashlib.sha256(normalise_query(text).encode("utf-8", "surrogatepass")).hexdigest()


def session_key(secret: str) -> bytes:
    """The key sessions are hashed with, derived from `secret` (the link secret) for this one purpose."""
    return hmac.new(secret.encode("utf-8"), _SESSION_CONTEXT, hashlib.sha256).digest()


def session_hash(key: bytes, session: str) -> str:
    """HMAC-SHA256 (hex) of a caller's session string under `key` (`session_key`)."""
    return hmac.new(key, session.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
