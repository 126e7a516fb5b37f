"""Which arm serves a request during a rollout (pure: no I/O).

A request is placed by a stable hash, never by a coin flip, so the same inputs always land on the same arm:
- canary: a sticky share of *sessions* is served by the candidate alone. The key is the caller's `session`, else the
  request id (a caller that sends none is one session per request). A session's bucket does not change while the
  share grows, so a ramp only adds sessions to the candidate, never moves one back and forth.
- interleave: a share of *requests* gets the team-draft interleaving of both rankings.
- shadow: a sampled share of requests also runs on the candidate off the response path; what is served is
  production's, so a shadow request's arm is `production`.
The rollout's id salts the hash: each rollout picks its own sessions, so the same callers do not see every candidate.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

PRODUCTION, CANDIDATE, INTERLEAVED = "production", "candidate", "interleaved"
ARMS = (PRODUCTION, CANDIDATE, INTERLEAVED)
TEAMS = (PRODUCTION, CANDIDATE)
MODES = ("shadow", "interleave", "canary")

_SCALE = float(1 << 64)


def bucket(key: str, salt: str) -> float:
    """A stable number in [0, 1) for `key` under `salt`: the first 8 bytes of SHA-256 over both, scaled."""
    digest = hashlib.sha256(f"{salt}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


@dataclass(frozen=True)
class Assignment:
    arm: str  # production | candidate | interleaved
    shadow: bool = False  # also run the candidate off the response path (shadow mode's sample)


def assign(mode: str, share: float, rollout_id: int, *, request_id: str, session: str | None) -> Assignment:
    """The arm of one request under a rollout in `mode` with `share` (see the module's docstring)."""
    if mode not in MODES:
        raise ValueError(f"rollout mode {mode!r} is not one of {', '.join(MODES)}")
    salt = f"rollout:{rollout_id}"
    if mode == "canary":
        chosen = bucket(session if session is not None else request_id, salt) < share
        return Assignment(CANDIDATE if chosen else PRODUCTION)
    chosen = bucket(request_id, salt) < share
    if mode == "interleave":
        return Assignment(INTERLEAVED if chosen else PRODUCTION)
    return Assignment(PRODUCTION, shadow=chosen)
