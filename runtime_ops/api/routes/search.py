"""`POST /api/search` and `POST /api/answer`: applications query a pipeline's production index.

Both need an API key with the `search` scope (`runtime-ops keys create app --scope search`): no key, no answer.
Each request reads the pipeline's `retrieval_index` alias once and is answered from that index alone, so a response
never mixes two model versions, also while a promotion or rollback swaps the alias; while a candidate is rolled out
(`rollout:` in defs.yaml) the request's arm may be the candidate's index or both, interleaved
(`serving/rollout_search.py`). Handlers are plain `def`s: embedding the query and reading the vector store block, so
they run in the thread pool.

A response names no arm, no team and no model version or index: a caller that knew which arm served it, or which
team drafted an item, could click one side only and steer the online gate. It carries the `request_id`
(`runtime_ops.online.request_ids`), the one thing feedback needs. What served the request (arm, each arm's model
version and index, each item's team) stays server-side in the query log (`runtime_ops.api.query_log_writer`: off
the request path), with the key that asked, the query's text and hash as the pipeline's `queries.log` says and the
caller's `session` only as a keyed hash; feedback on it is `routes/feedback.py`. Each key and each session may
search at most as fast as RUNTIME_OPS_KEY_SEARCHES_PER_S / RUNTIME_OPS_SESSION_SEARCHES_PER_S allow
(`runtime_ops.api.request_limits`: 429 with Retry-After).
"""

from __future__ import annotations

import os
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from pydantic import BaseModel, ConfigDict, Field

from runtime_ops.api.auth import SearchKey
from runtime_ops.api.deps import OpsContext
from runtime_ops.api.query_log_writer import QueryLogWriter
from runtime_ops.api.request_limits import RequestLimits
from runtime_ops.api.searchers import Searchers
from runtime_ops.observability.metrics import METRICS
from runtime_ops.online.arms import CANDIDATE, PRODUCTION
from runtime_ops.online.hashing import query_hash, session_hash, session_key
from runtime_ops.online.query_records import QueryRecord, ShownItem
from runtime_ops.online.request_ids import new_request_id
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.serving.answerer import answer_hits
from runtime_ops.serving.endpoint import ChatEndpoint
from runtime_ops.serving.rollout_search import RolloutSearch, Served
from runtime_ops.serving.search import MAX_K, NoServingIndex
from runtime_ops.vectors.base import VectorStoreError

router = APIRouter(tags=["search"])

MAX_QUERY_CHARS = 2000
MAX_SESSION_CHARS = 200
_SESSION = Field(
    default=None,
    min_length=1,
    max_length=MAX_SESSION_CHARS,
    description="An opaque key of the caller's user session (a cookie, a user id): stored only as a keyed hash, it "
    "lets the query log group a session's requests.",
)


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for, in plain words.")
    k: int = Field(default=5, ge=1, le=MAX_K, description="How many chunks to return.")
    pipeline: str | None = Field(default=None, description="Which pipeline (default: the only one, or `demo`).")
    session: str | None = _SESSION


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=4, ge=1, le=20, description="How many chunks the answer is drawn from.")
    pipeline: str | None = None
    session: str | None = _SESSION


class SearchMetrics:
    def __init__(self, registry: CollectorRegistry, specs: dict[str, PipelineSpec]) -> None:
        # No `<name>_created` series: outside the contract, and every other family of /metrics has none.
        disable_created_metrics()
        lat = METRICS["runtime_ops_search_latency_seconds"]
        self.latency = Histogram(lat.name, lat.help, list(lat.labels), buckets=list(lat.buckets), registry=registry)
        self.results = _counter("runtime_ops_search_results_total", registry)
        self.requests = _counter("runtime_ops_search_requests_total", registry)
        self.zero_results = _counter("runtime_ops_search_zero_results_total", registry)
        self.feedback = _counter("runtime_ops_feedback_total", registry)
        rank = METRICS["runtime_ops_feedback_click_rank"]
        self.click_rank = Histogram(
            rank.name, rank.help, list(rank.labels), buckets=list(rank.buckets), registry=registry
        )
        self.dropped = _counter("runtime_ops_query_log_dropped_total", registry)
        # Series that exist from the start at 0, so a rate or a ratio over them is defined before the first event.
        for name in specs:
            self.dropped.labels(name)
            for route in ("search", "answer"):
                self.requests.labels(name, route, PRODUCTION)
                self.zero_results.labels(name, route, PRODUCTION)

    def answered(self, spec: PipelineSpec, route: str, served: Served, took: float) -> None:
        self.latency.labels(spec.name, route).observe(took)
        versions = served.versions()
        for team in served.teams:  # each hit counts for the model version that produced it
            self.results.labels(spec.name, str(versions[team or served.arm])).inc()
        self.requests.labels(spec.name, route, served.arm).inc()
        if not served.hits:
            self.zero_results.labels(spec.name, route, served.arm).inc()


def _counter(name: str, registry: CollectorRegistry) -> Counter:
    found = METRICS[name]
    return Counter(found.name.removesuffix("_total"), found.help, list(found.labels), registry=registry)


class QueryLogging:
    """What the routes need to record a request: the writer, the key sessions are hashed with, the clock."""

    def __init__(self, ops: OpsContext, writer: QueryLogWriter) -> None:
        self.writer = writer
        self.now = ops.now
        self._session_key = session_key(ops.link_secret)

    def session_hash(self, session: str | None) -> str | None:
        """The keyed hash the query log keeps of a caller's session (None: no session)."""
        return session_hash(self._session_key, session) if session is not None else None

    def record(
        self,
        spec: PipelineSpec,
        route: str,
        query: str,
        session_hash: str | None,
        k: int,
        served: Served,
        took: float,
        key_id: str,
    ) -> None:
        queries = spec.queries
        versions, indexes = served.versions(), served.indexes()
        self.writer.submit(
            QueryRecord(
                request_id=served.request_id,
                pipeline=spec.name,
                route=route,
                arm=served.arm,
                created_at=self.now(),
                k=k,
                latency_ms=round(took * 1000, 3),
                production_version=versions.get(PRODUCTION),
                production_index=indexes.get(PRODUCTION),
                candidate_version=versions.get(CANDIDATE),
                candidate_index=indexes.get(CANDIDATE),
                rollout_id=served.rollout_id,
                shared_prefix=served.shared_prefix,
                query_text=query if queries.keeps_text else None,
                query_hash=query_hash(query) if queries.keeps_hash else None,
                session_hash=session_hash,
                key_id=key_id,
                items=tuple(
                    ShownItem(rank, h.chunk_id, h.document_id, h.document_key, team)
                    for rank, (h, team) in enumerate(zip(served.hits, served.teams, strict=True), 1)
                ),
            )
        )


def install_search(app: FastAPI, ops: OpsContext, registry: CollectorRegistry) -> None:
    app.state.searchers = searchers = Searchers(ops)
    app.state.search_metrics = metrics = SearchMetrics(registry, searchers.specs())
    settings = ops.settings
    writer = QueryLogWriter(
        ops.store.query_log,
        flush_s=settings.query_log_flush_s,
        batch=settings.query_log_batch,
        capacity=settings.query_log_queue,
        on_drop=lambda record, reason: metrics.dropped.labels(record.pipeline).inc(),
    )
    app.state.query_logging = QueryLogging(ops, writer)
    app.state.request_limits = RequestLimits(settings, ops.now, ops.refusals, shared=ops.refusals.shared)


async def get_searchers(request: Request) -> Searchers:
    searchers: Searchers = request.app.state.searchers
    return searchers


async def get_metrics(request: Request) -> SearchMetrics:
    metrics: SearchMetrics = request.app.state.search_metrics
    return metrics


async def get_query_logging(request: Request) -> QueryLogging:
    found: QueryLogging = request.app.state.query_logging
    return found


async def get_limits(request: Request) -> RequestLimits:
    found: RequestLimits = request.app.state.request_limits
    return found


def client_of(request: Request) -> str | None:
    return request.client.host if request.client else None


def _served(spec: PipelineSpec, routed: RolloutSearch, query: str, k: int, session: str | None, now: Any) -> Served:
    try:
        return routed.search(query, k, request_id=new_request_id(now), session=session)
    except NoServingIndex as exc:
        raise HTTPException(503, str(exc)) from None
    except VectorStoreError as exc:
        raise HTTPException(503, f"pipeline {spec.name}: vector store unavailable: {exc}") from None


@router.post("/api/search", responses={429: {"description": "Over this key's or session's search limit."}})
def search(
    request: Request,
    body: SearchRequest,
    caller: SearchKey,
    searchers: Annotated[Searchers, Depends(get_searchers)],
    metrics: Annotated[SearchMetrics, Depends(get_metrics)],
    query_log: Annotated[QueryLogging, Depends(get_query_logging)],
    limits: Annotated[RequestLimits, Depends(get_limits)],
) -> dict[str, Any]:
    started = time.perf_counter()
    session = query_log.session_hash(body.session)
    limits.check("search", caller.key_id, session, client=client_of(request), path=request.url.path)
    spec, routed = searchers.routed(body.pipeline)
    served = _served(spec, routed, body.query, body.k, body.session, query_log.now())
    result = served.result
    took = time.perf_counter() - started
    metrics.answered(spec, "search", served, took)
    query_log.record(spec, "search", body.query, session, body.k, served, took, caller.key_id)
    return {
        "request_id": served.request_id,
        "pipeline": result.pipeline,
        "results": served.results(),
        "took_ms": round(took * 1000, 2),
    }


@router.post("/api/answer", responses={429: {"description": "Over this key's or session's search limit."}})
def answer(
    request: Request,
    body: AnswerRequest,
    caller: SearchKey,
    searchers: Annotated[Searchers, Depends(get_searchers)],
    metrics: Annotated[SearchMetrics, Depends(get_metrics)],
    query_log: Annotated[QueryLogging, Depends(get_query_logging)],
    limits: Annotated[RequestLimits, Depends(get_limits)],
) -> dict[str, Any]:
    started = time.perf_counter()
    session = query_log.session_hash(body.session)
    limits.check("search", caller.key_id, session, client=client_of(request), path=request.url.path)
    spec, routed = searchers.routed(body.pipeline)
    served = _served(spec, routed, body.question, body.k, body.session, query_log.now())
    result, hits = served.result, served.hits
    llm = None
    if spec.answers.endpoint:
        key = os.environ.get(spec.answers.api_key_env) if spec.answers.api_key_env else None
        llm = ChatEndpoint(spec.answers.endpoint, api_key=key or None, model=spec.answers.model, timeout_s=20.0)
    try:
        embedder = routed.searcher.embedder(result.model_version)
        answered = answer_hits(llm, body.question, result.query_vectors[0], hits, embedder.embed)
    finally:
        if llm is not None:
            llm.close()
    took = time.perf_counter() - started
    metrics.answered(spec, "answer", served, took)
    query_log.record(spec, "answer", body.question, session, body.k, served, took, caller.key_id)
    return {
        "request_id": served.request_id,
        "pipeline": result.pipeline,
        "answer": answered.text,
        "answerer": answered.answerer,
        "endpoint_error": answered.endpoint_error,
        # One per passage (overlapping chunks of a document are one), numbered as the model prompt numbers them.
        "sources": answered.sources(),
        "took_ms": round(took * 1000, 2),
    }
