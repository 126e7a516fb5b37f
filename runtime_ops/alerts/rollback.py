"""Roll `production` back to its previous version: the promotion saga toward an older version, under the
`promotion` lock with fencing. No Dagster here (the op in `alerts.jobs` calls it).

The previous version comes from the `production` alias history. A rollback moves production only from the
version it saw when the alert fired (compare-and-set): if a promotion moved production in between, the rollback
is refused instead of undoing that promotion. Not pre-approved, it needs an approved request for this exact
move (`rollback_digest`). Before the lock is released, the serving index is brought to production's (its one
writer, `serving.index_swap`), also when there was nothing to roll back: serving follows production at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime_ops.labels import version_label
from runtime_ops.locks.base import Locker
from runtime_ops.locks.promotion import promotion_lease
from runtime_ops.models.promotion_saga import StoreJournal, promotion_steps
from runtime_ops.saga.engine import run
from runtime_ops.serving.index_swap import serve_production
from runtime_ops.store import StateStore
from runtime_ops.store.approvals.requests import Requests
from runtime_ops.store.operations.alerts import rollback_digest
from runtime_ops.store.registry.registry import Registry
from runtime_ops.tags import PRODUCTION_ALIAS, SERVING_INDEX_ALIAS
from runtime_ops.vectors.base import VectorStore

ROLLBACK_ACTOR_PREFIX = "rollback:"


class RollbackRefused(RuntimeError):
    """The rollback must not happen (nothing to roll back to, production moved, no approval); says why."""


def previous_version(history: Sequence[dict[str, Any]], current: int | None) -> int | None:
    """The version `production` pointed at before `current`, from its alias history (oldest first).

    Versions production was rolled back *from* (or compensated away from) are skipped: after v3 -> v2 by a
    rollback, the previous version of v2 is v1, never v3 again.
    """
    if current is None:
        return None
    bad = {
        h["old_target"]
        for h in history
        if h.get("old_target") is not None
        and str(h.get("actor") or "").startswith((ROLLBACK_ACTOR_PREFIX, "compensation"))
    }
    for h in reversed(history):
        old = h.get("old_target")
        if old is None or old == current or old in bad:
            continue
        return int(old)
    return None


def plan_rollback(registry: Registry) -> tuple[int, int]:
    """(current production, the version to roll back to); RollbackRefused when there is none."""
    current = registry.alias(PRODUCTION_ALIAS)
    if current is None:
        raise RollbackRefused("no production model: nothing to roll back")
    target = previous_version(registry.alias_history(PRODUCTION_ALIAS), current)
    if target is None:
        raise RollbackRefused(f"production {version_label(current)} has no previous version in the alias history")
    if registry.get_model(target) is None:
        raise RollbackRefused(f"the previous version {version_label(target)} is not in the model registry")
    return int(current), target


def saga_id(alert_key: str) -> str:
    return f"rollback-{alert_key}"


def verify_approval(
    requests: Requests, *, approval_id: str, alert_key: str, from_version: int, to_version: int
) -> dict[str, Any]:
    """The approved request for exactly this rollback, or RollbackRefused."""
    request = requests.get_request(approval_id)
    if request is None:
        raise RollbackRefused(f"refusing to roll back: approval request {approval_id!r} does not exist")
    if request["candidate_digest"] != rollback_digest(alert_key, from_version, to_version):
        raise RollbackRefused(
            f"refusing to roll back: {approval_id} was not given for rolling production back from v{from_version} "
            f"to v{to_version} for {alert_key}"
        )
    if request["status"] != "approved":
        raise RollbackRefused(f"refusing to roll back: {approval_id} is {request['status']}, not approved")
    return request


@dataclass(frozen=True)
class RollbackOutcome:
    status: str  # done | noop
    saga_id: str
    fence: int
    from_version: int
    to_version: int
    message: str
    index_id: int | None = None  # the serving index afterwards (production's)
    index_moved: bool = False  # the rollback changed the serving index


def run_rollback(
    store: StateStore,
    locker: Locker,
    vectors: VectorStore,
    *,
    alert_key: str,
    alert_ref: str,
    from_version: int,
    to_version: int,
    approval_id: str | None,
    run_id: str | None,
    log: Callable[[str], None] = lambda _: None,
    decider: str | None = None,
) -> RollbackOutcome:
    """Move production from `from_version` back to `to_version` with the promotion saga, under the promotion
    lock, every alias write carrying the lease's fencing token.

    `alert_ref` (e.g. `alert-12`) stands in for the approval id of a pre-approved rollback in the alias
    history and the audit log; `decider` names who decided a rollback without a request (an operator). A re-run
    finishes an interrupted saga or finds it done; a rollback whose premise no longer holds (production moved to
    another version meanwhile) is refused.
    """
    request: dict[str, Any]
    if approval_id is not None:
        approved = verify_approval(
            store.requests,
            approval_id=approval_id,
            alert_key=alert_key,
            from_version=from_version,
            to_version=to_version,
        )
        request = {"id": approved["id"], "decided_by": f"{ROLLBACK_ACTOR_PREFIX}{approved['decided_by']}"}
    else:
        request = {"id": alert_ref, "decided_by": f"{ROLLBACK_ACTOR_PREFIX}{decider or 'preapproved'}"}
    if store.registry.get_model(to_version) is None:
        raise RollbackRefused(f"refusing to roll back: v{to_version} is not in the model registry")
    sid = saga_id(alert_key)
    assert store.pipeline is not None, "the promotion lock is per pipeline: a scoped store"
    with promotion_lease(locker, store.pipeline) as lease:
        serving_before = store.registry.alias(SERVING_INDEX_ALIAS)
        journal = StoreJournal(store.sagas, run_id, kind="rollback")
        state = journal.load(sid)
        fresh = state is None or state.status == "compensated"
        current = store.registry.alias(PRODUCTION_ALIAS)
        if fresh and current != from_version:
            if current != to_version:
                now = "unset" if current is None else version_label(current)
                raise RollbackRefused(
                    f"refusing to roll back: production is {now}, not {version_label(from_version)} as when the alert "
                    "fired (it was moved since); rolling back now would undo that change"
                )
            status = "noop"
            message = f"production is already {version_label(to_version)}: nothing to roll back"
            log(message)
        else:
            # The previous model's index was kept: the swap only replays the changes since it last served.
            steps = promotion_steps(
                store, vectors, version=to_version, request=request, lease=lease, run_id=run_id, log=log
            )
            status = run(sid, steps, {}, journal, on_event=log).status
            message = (
                f"production rolled back from {version_label(from_version)} to {version_label(to_version)} (saga {sid})"
            )
        # Serving follows production now, not at the next landing: also when an earlier writer left it elsewhere.
        served = serve_production(store, lease, vectors, actor=request["decided_by"], run_id=run_id, log=log)
    moved = served.serving != serving_before
    return RollbackOutcome(status, sid, lease.fence, from_version, to_version, message, served.serving, moved)
