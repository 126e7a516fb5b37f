"""Signed approval links: bound to one approver, request and candidate digest; expiring; single use.

The token is itsdangerous-signed (HMAC) JSON with a random nonce; single use is enforced by the state store
recording the nonce when the link decides.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

# The approver a link names when a pipeline declares no approvers: whoever reads the signed links the
# approvals sensor prints to a developer's terminal.
LOCAL_APPROVER = "local"


def display_name(approver: str) -> str:
    """How a page or message names `approver`: a bare "local" reads like a place, not a person."""
    return "the local operator" if approver == LOCAL_APPROVER else approver


class LinkError(ValueError):
    """A link that cannot be used; `kind` is tampered | expired."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class LinkClaims:
    request_id: str
    approver: str
    digest: str
    expires_at: datetime
    nonce: str


def _serializer(secret: str):  # type: ignore[no-untyped-def]
    from itsdangerous import URLSafeSerializer

    return URLSafeSerializer(secret, salt="runtime_ops.approval-link")


def issue(secret: str, *, request_id: str, approver: str, digest: str, expires_at: datetime) -> str:
    payload = {
        "r": request_id,
        "a": approver,
        "d": digest,
        "e": int(expires_at.timestamp()),
        "n": secrets.token_urlsafe(12),
    }
    return str(_serializer(secret).dumps(payload))


def read(secret: str, token: str, now: datetime) -> LinkClaims:
    from itsdangerous import BadSignature

    try:
        payload = _serializer(secret).loads(token)
        claims = LinkClaims(
            request_id=str(payload["r"]),
            approver=str(payload["a"]),
            digest=str(payload["d"]),
            expires_at=datetime.fromtimestamp(int(payload["e"]), UTC),
            nonce=str(payload["n"]),
        )
    except (BadSignature, KeyError, TypeError, ValueError):
        raise LinkError("tampered", "This approval link is not valid: it was altered or was not issued here.") from None
    if now >= claims.expires_at:
        raise LinkError("expired", f"This approval link expired at {claims.expires_at:%Y-%m-%d %H:%M} UTC.")
    return claims
