"""Unauthenticated failures of the ops API's routes, audited in aggregate and rate-limited per client.

`Refusals.refused` is called by every route's credential check when it fails (an API key, a Slack signature, a
link, the alert and landing tokens): the first refusal of a window is appended to the audit log with its detail,
later ones are summed into one `refusals` record when the window closes (the app flushes every window and at
shutdown), and a client over its limit gets a Retry-After to answer 429 with. See `policies.refusals`; with
REDIS_URL the limit is counted in Redis (`runtime_ops.api.redis_buckets`), across the API's replicas.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from runtime_ops.api.redis_buckets import BucketsUnavailable, RedisBuckets
from runtime_ops.decisions.decide import AuditAppender, refuse
from runtime_ops.policies.refusals import RefusalPolicy, Summary

log = logging.getLogger("runtime_ops.api.refusals")


class Refusals:
    """`shared`: buckets in Redis (REDIS_URL), shared by the API's replicas; None: this process's own. While
    Redis does not answer, this process's buckets limit on their own (one warning when that starts)."""

    def __init__(
        self,
        audit: AuditAppender,
        now: Callable[[], datetime],
        policy: RefusalPolicy | None = None,
        shared: RedisBuckets | None = None,
    ) -> None:
        self.audit, self.now = audit, now
        self.policy = policy or RefusalPolicy()
        self.shared = shared
        self._lock = threading.Lock()
        self._shared_down = False

    def refused(self, *, channel: str, outcome: str, client: str | None, detail: dict[str, Any]) -> int | None:
        """Record one failure (blocking: call it in the thread pool); the seconds to ask the client to wait when
        it is over its limit, else None."""
        now = self.now()
        spent, retry_after = self._spend_shared(client or "-", now)
        with self._lock:
            if not spent:
                retry_after = self.policy.buckets.spend(client or "-", now)
            reason = detail.get("reason") or detail.get("message")
            reason = str(reason) if reason else None
            verdict = self.policy.counted(channel, outcome, client, now, reason, retry_after)
        for summary in verdict.summaries:
            self._write(summary)
        if verdict.record:
            refuse(self.audit, channel=channel, outcome=outcome, detail={**detail, "client": client}, now=now)
        return verdict.retry_after

    def _spend_shared(self, client: str, now: datetime) -> tuple[bool, int | None]:
        """(whether Redis counted it, its answer)."""
        if self.shared is None:
            return False, None
        try:
            retry_after = self.shared.spend(client, now)
        except BucketsUnavailable as exc:
            if not self._shared_down:
                log.warning("refusal limiter: %s; limiting per process until it answers", exc)
            self._shared_down = True
            return False, None
        if self._shared_down:
            log.info("refusal limiter: Redis answers again; limiting across replicas")
        self._shared_down = False
        return True, retry_after

    def flush(self, *, final: bool = False) -> int:
        """Write the summaries of the windows that closed (all of them when `final`); how many were written."""
        with self._lock:
            summaries = self.policy.close(None if final else self.now())
        for summary in summaries:
            self._write(summary)
        return len(summaries)

    def _write(self, s: Summary) -> None:
        detail = {
            "count": s.count,
            "first_at": s.first_at.isoformat(),
            "last_at": s.last_at.isoformat(),
            "clients": [list(c) for c in s.clients],
            "reasons": [list(r) for r in s.reasons],
            "limited": s.limited,
        }
        self.audit.append(event="refusals", channel=s.channel, outcome=s.outcome, detail=detail, now=s.last_at)
