"""Who the online evidence comes from (pure): one observation per session and query, and how much of it the largest
API key and the largest session contributed.

Live evidence is a vote of users, and one client must not cast most of it. Two rules:

- **dedupe**: a session asking the same query again is the same user with the same need, not new evidence, so its
  requests of one query count once (`dedupe`: same session hash and same query hash → one observation). Requests
  without a session, or whose query is not hashed (`queries: {log: off}`), cannot be grouped and count alone.
- **concentration**: the share of the decisive observations (those that carry a preference) that the largest key
  and the largest session contributed (`concentration`); a key or session above the declared share
  (`gate.online.max_key_share`, `max_session_share`) is *dominant*, and its observations are left out of the
  verdict (`dominant`). A request without a session is a session of its own (as `online.arms.assign` places it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Concentration", "Source", "concentration", "dedupe", "dominant"]

T = TypeVar("T")
NO_KEY = "-"  # records logged before requests carried their key: one anonymous key, never a free pass


@dataclass(frozen=True)
class Source:
    """Who made one request: the API key, the session's keyed hash and the query's hash (None: not recorded; a
    request without a session is a session of its own)."""

    key: str | None = None
    session: str | None = None
    query: str | None = None

    @property
    def key_name(self) -> str:
        return self.key or NO_KEY

    def group(self) -> Hashable | None:
        """What identifies repeats of one observation: (session, query) when both are known; None: it has none."""
        if self.session is not None and self.query is not None:
            return (self.session, self.query)
        return None


def dedupe(items: Sequence[T], source: Callable[[T], Source], combine: Callable[[list[T]], T]) -> list[T]:
    """`items` with each session's repeats of one query combined into one (`combine`, given them in order); the
    groups keep the order of their first item."""
    groups: dict[Hashable, list[T]] = {}
    for i, item in enumerate(items):
        group = source(item).group()
        groups.setdefault(("alone", i) if group is None else group, []).append(item)
    return [group[0] if len(group) == 1 else combine(group) for group in groups.values()]


@dataclass(frozen=True)
class Concentration:
    """How concentrated `observations` decisive observations are: the largest key's and session's shares."""

    observations: int
    keys: int
    sessions: int
    top_key: str | None
    top_key_share: float
    top_session_share: float

    def to_dict(self) -> dict[str, object]:
        return {
            "observations": self.observations,
            "keys": self.keys,
            "sessions": self.sessions,
            "top_key": self.top_key,
            "top_key_share": self.top_key_share,
            "top_session_share": self.top_session_share,
        }


def concentration(sources: Sequence[Source]) -> Concentration:
    """The shares of the largest key and session among `sources` (one per decisive observation)."""
    n = len(sources)
    if not n:
        return Concentration(0, 0, 0, None, 0.0, 0.0)
    keys, sessions = _counts(sources)
    top_key, top = keys.most_common(1)[0]
    alone = sum(1 for s in sources if s.session is None)  # each a session of its own
    top_session = max(sessions.most_common(1)[0][1] if sessions else 0, 1 if alone else 0)
    return Concentration(n, len(keys), len(sessions) + alone, top_key, top / n, top_session / n)


def dominant(
    sources: Sequence[Source], *, max_key_share: float, max_session_share: float
) -> tuple[frozenset[str], frozenset[str]]:
    """The keys and the sessions whose share of `sources` exceeds the declared maximum (one pass over the whole:
    leaving one out never makes another dominant). A request without a session is one observation whatever the
    share of one is, so only named sessions can dominate. A key dominates only beside other keys: an application
    that serves its users through one key is every observation's key, and its users are told apart by their
    sessions (which `max_session_share` bounds)."""
    n = len(sources)
    if not n:
        return frozenset(), frozenset()
    keys, sessions = _counts(sources)
    return (
        frozenset(k for k, c in keys.items() if len(keys) > 1 and c / n > max_key_share),
        frozenset(s for s, c in sessions.items() if c / n > max_session_share),
    )


def _counts(sources: Sequence[Source]) -> tuple[Counter[str], Counter[str]]:
    return Counter(s.key_name for s in sources), Counter(s.session for s in sources if s.session is not None)
