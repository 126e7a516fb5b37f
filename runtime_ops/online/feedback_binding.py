"""Whose feedback a logged request accepts (pure: no I/O): only the API key that made it, and, when it was made in a
session, only feedback naming that same session.

Live evidence is only as honest as its clicks. Without the binding any `search` key could click on any other
application's requests, and one key could outweigh every real user. The session is compared as the query log keeps
it (a keyed hash, `online.hashing.session_hash`), in constant time.
"""

from __future__ import annotations

import hmac

__all__ = ["binding_refusal"]


def binding_refusal(
    *,
    request_id: str,
    made_by: str | None,
    made_in: str | None,
    caller: str,
    caller_session: str | None,
) -> str | None:
    """Why the caller may not send feedback on `request_id` (None: it may).

    `made_by`/`made_in`: the key and session hash the query log recorded for the request (None: none recorded);
    `caller`/`caller_session`: the key sending the feedback and the hash of the session it names."""
    if made_by is None:
        return (
            f"request {request_id} was logged without the API key that made it (before feedback was bound to keys): "
            "nobody can show they made it, so it takes no feedback"
        )
    if not hmac.compare_digest(made_by, caller):
        return f"request {request_id} was made by another API key: feedback is accepted only from the key that searched"
    if made_in is None:
        if caller_session is not None:
            return f"request {request_id} was made without a session: send its feedback without one"
        return None
    if caller_session is None:
        return f"request {request_id} was made in a session: name the same `session` in its feedback"
    if not hmac.compare_digest(made_in, caller_session):
        return f"request {request_id} was made in another session: feedback must name the session that searched"
    return None
