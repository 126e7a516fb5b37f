"""Serving a request while a candidate is rolled out: which arm answers it, and the shadow comparison.

Per request the pipeline's active rollout is read from a per-pipeline cache that is at most ROLLOUT_READ_EVERY_S
old (one indexed read a second, like the searchers' warm loop reads the alias), and `online.arms.assign` places the
request: production, the candidate alone (canary), or both interleaved by team draft seeded from the request id (so a
logged request's list can be rebuilt). Shadow requests are served by production; for the sampled share the candidate
also runs on a bounded background executor (a busy executor drops the comparison rather than queue it) and
overlap@k and both latencies go to the rollout's running sums in the store.

A request reads the production index (the `retrieval_index` alias, once) and the candidate index (by the rollout's
id) once each, so an alias swap in the middle of a request changes nothing for it, and it never mixes two model
versions except by interleaving's design. When the candidate's index cannot answer (dropped, its vector store down)
the request is served by production: a rollout never costs an answer.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runtime_ops.online.arms import CANDIDATE, INTERLEAVED, PRODUCTION, Assignment, assign
from runtime_ops.online.credit import common_prefix
from runtime_ops.online.interleaving import team_draft
from runtime_ops.online.statistics import overlap_at_k
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.serving.search import NoServingIndex, Searcher, SearchHit, SearchResult
from runtime_ops.vectors.base import VectorStoreError

log = logging.getLogger("runtime_ops.serving")

# How stale the cached active rollout may be: a rollout that starts or stops is seen within this.
ROLLOUT_READ_EVERY_S = 1.0
# Shadow comparisons waiting or running at once; more are dropped (counted), never queued behind live traffic.
SHADOW_CAPACITY = 4


@dataclass(frozen=True)
class ActiveRollout:
    rollout: dict[str, Any]
    candidate_index: dict[str, Any]  # the candidate's index row, read with the rollout

    @property
    def id(self) -> int:
        return int(self.rollout["id"])


@dataclass(frozen=True)
class Served:
    """What answered one request: the arm, the hits shown (with each one's team when interleaved), and which model
    version and index each arm used. `result` is the ranking whose embedder and query vector the answer route
    scores sentences with (the candidate's for a canary request, else production's)."""

    request_id: str
    arm: str
    hits: list[SearchHit]
    teams: list[str | None]
    served_by: list[dict[str, Any]]
    result: SearchResult
    rollout_id: int | None = None
    # Interleaved only: how many leading ranks both rankings shared; team draft shows them first whatever its
    # coins, so clicks there credit neither team (online/credit.py). Logged with the request for its evidence.
    shared_prefix: int | None = None

    def results(self) -> list[dict[str, Any]]:
        """The response's results: the hits alone. An item's team, like the arm, stays in the query log: a caller
        that knew it could click one team's items only (`routes/search.py`)."""
        return [h.as_dict() for h in self.hits]

    def versions(self) -> dict[str, int]:
        """The model version of each arm that served (by arm, or by team when interleaved)."""
        return {by.get("arm") or by["team"]: int(by["model_version"]) for by in self.served_by}

    def indexes(self) -> dict[str, int]:
        """The index id of each arm that served (by arm, or by team when interleaved)."""
        return {by.get("arm") or by["team"]: int(by["index_id"]) for by in self.served_by}


def _by(label: str, arm: str, result: SearchResult) -> dict[str, Any]:
    return {label: arm, "model_version": result.model_version, "index_id": result.index_id}


class RolloutSearch:
    """One pipeline's requests, routed by its active rollout (none, or the pipeline's rollout mode is off:
    production, as without rollouts)."""

    def __init__(
        self,
        spec: PipelineSpec,
        searcher: Searcher,
        *,
        clock: Callable[[], float] = time.monotonic,
        shadow_capacity: int = SHADOW_CAPACITY,
    ) -> None:
        self.spec, self.searcher, self._clock = spec, searcher, clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._active: ActiveRollout | None = None
        self._unservable: int | None = None  # the rollout whose candidate index could not be read
        self._shadow = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"runtime-ops-shadow-{spec.name}")
        self._shadow_slots = threading.BoundedSemaphore(shadow_capacity)
        self.shadow_dropped = 0

    # ------------------------------------------------------------------ the active rollout
    def active(self) -> ActiveRollout | None:
        """The active rollout, at most ROLLOUT_READ_EVERY_S old; None past its max_duration (the approvals tick
        records its end) or when its candidate index cannot be read."""
        if not self.spec.rollout.enabled:
            return None
        now = self._clock()
        with self._lock:
            if self._read_at is not None and now - self._read_at < ROLLOUT_READ_EVERY_S:
                found = self._active
            else:
                found = self._active = self._read()
                self._read_at = now
        if found is not None and found.rollout["ends_at"] <= datetime.now(UTC):
            return None
        return found

    def _read(self) -> ActiveRollout | None:
        row = self.searcher.store.rollouts.active()
        if row is None:
            return None
        try:
            return ActiveRollout(row, self.searcher.index_row(int(row["candidate_index_id"])))
        except NoServingIndex as exc:
            if self._unservable != row["id"]:  # said once per rollout, not at every read
                log.warning(f"pipeline {self.spec.name}: rollout #{row['id']} is active but serves production: {exc}")
                self._unservable = int(row["id"])
            return None

    def warm(self) -> int | None:
        """Load the active rollout's candidate embedder and index (as the warm loop does production's); its index
        id, or None when there is no rollout."""
        found = self.active()
        if found is None:
            return None
        self.searcher.warm_index(found.candidate_index)
        return int(found.candidate_index["id"])

    # ------------------------------------------------------------------ one request
    def search(self, query: str, k: int, *, request_id: str, session: str | None) -> Served:
        found = self.active()
        if found is None:
            return self._production(request_id, query, k)
        rollout = found.rollout
        placed = assign(rollout["mode"], float(rollout["share"]), found.id, request_id=request_id, session=session)
        try:
            return self._serve(found, placed, query, k, request_id)
        except (NoServingIndex, VectorStoreError) as exc:
            log.warning(f"pipeline {self.spec.name}: candidate of rollout #{found.id} failed, production serves: {exc}")
            return self._production(request_id, query, k)

    def _production(self, request_id: str, query: str, k: int, rollout_id: int | None = None) -> Served:
        result = self.searcher.search([query], k)
        hits = result.hits[0]
        served_by = [_by("arm", PRODUCTION, result)]
        return Served(request_id, PRODUCTION, hits, [None] * len(hits), served_by, result, rollout_id)

    def _serve(self, found: ActiveRollout, placed: Assignment, query: str, k: int, request_id: str) -> Served:
        if placed.arm == CANDIDATE:
            result = self.searcher.search_index(found.candidate_index, [query], k)
            hits = result.hits[0]
            served_by = [_by("arm", CANDIDATE, result)]
            return Served(request_id, CANDIDATE, hits, [None] * len(hits), served_by, result, found.id)
        if placed.arm == INTERLEAVED:
            production = self.searcher.search([query], k)
            candidate = self.searcher.search_index(found.candidate_index, [query], k)
            drafted = team_draft(
                production.hits[0], candidate.hits[0], k, random.Random(request_id), key=lambda h: h.chunk_id
            )
            return Served(
                request_id,
                INTERLEAVED,
                [d.item for d in drafted],
                [d.team for d in drafted],
                [_by("team", PRODUCTION, production), _by("team", CANDIDATE, candidate)],
                production,
                found.id,
                common_prefix(production.hits[0], candidate.hits[0], key=lambda h: h.chunk_id),
            )
        started = time.perf_counter()
        served = self._production(request_id, query, k, found.id)
        if placed.shadow:
            self._compare(found, query, k, served.hits, time.perf_counter() - started)
        return served

    # ------------------------------------------------------------------ shadow
    def _compare(self, found: ActiveRollout, query: str, k: int, shown: list[SearchHit], took_s: float) -> None:
        if not self._shadow_slots.acquire(blocking=False):
            with self._lock:
                self.shadow_dropped += 1
            return
        try:
            self._shadow.submit(self._shadow_run, found, query, k, [h.chunk_id for h in shown], took_s)
        except RuntimeError:  # shut down
            self._shadow_slots.release()

    def _shadow_run(self, found: ActiveRollout, query: str, k: int, production: list[int], took_s: float) -> None:
        try:
            started = time.perf_counter()
            result = self.searcher.search_index(found.candidate_index, [query], k)
            candidate_s = time.perf_counter() - started
            overlap = overlap_at_k(production, [h.chunk_id for h in result.hits[0]], k)
            self.searcher.store.rollouts.record_shadow(
                found.id, overlap=overlap, production_s=took_s, candidate_s=candidate_s
            )
        except Exception as exc:  # off the response path: a failed comparison is logged, never raised to a caller
            log.warning(f"pipeline {self.spec.name}: shadow comparison of rollout #{found.id} failed: {exc}")
        finally:
            self._shadow_slots.release()

    def drain(self, timeout_s: float = 10.0) -> None:
        """Wait for the shadow comparisons under way (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        taken = 0
        try:
            while taken < SHADOW_CAPACITY and time.monotonic() < deadline:
                if self._shadow_slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    taken += 1
        finally:
            for _ in range(taken):
                self._shadow_slots.release()

    def close(self) -> None:
        self._shadow.shutdown(wait=False, cancel_futures=True)
