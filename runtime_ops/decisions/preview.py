"""What a signed link would do if used now: the approval page's GET, before anyone clicks. Pure.

The same conditions the vote enforces on the POST (single use, bound to one candidate digest, only while
pending), read without deciding, so the page can show the evidence or say plainly why the link is spent.
The vote itself re-checks all of them under the request row's lock: this answer is advice, not a guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

LinkState = Literal["open", "unknown_request", "link_used", "candidate_changed", "already_decided"]


def link_state(request: Mapping[str, Any] | None, *, link_digest: str, link_used: bool) -> LinkState:
    """`request`: the row the link names (None if unknown); `link_digest`: the candidate digest the link was
    issued for; `link_used`: whether its nonce already decided."""
    if request is None:
        return "unknown_request"
    if link_used:
        return "link_used"
    if link_digest != request["candidate_digest"]:
        return "candidate_changed"
    if request["status"] != "pending":
        return "already_decided"
    return "open"
