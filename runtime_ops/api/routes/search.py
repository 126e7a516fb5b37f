"""`POST /api/search` and `POST /api/answer`: applications query a pipeline's production index.

Both need an API key with the `search` scope (`runtime-ops keys create app --scope search`): no key, no answer.
Each request reads the pipeline's `retrieval_index` alias once and is answered from that index alone, so a response
never mixes two model versions, also while a promotion or rollback swaps the alias; while a candidate is rolled out
(`rollout:` in defs.yaml) the request's arm may be the candidate's index or both, interleaved
(`serving/rollout_search.py`), and the response names the arm and what served it. Handlers are plain `def`s:
embedding the query and reading the vector store block, so they run in the thread pool.
"""

from __future__ import annotations

import os
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from pydantic import BaseModel, ConfigDict, Field

from runtime_ops.api.auth import SearchKey
from runtime_ops.api.deps import OpsContext, get_ops
from runtime_ops.api.searchers import Searchers
from runtime_ops.observability.metrics import METRICS
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


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for, in plain words.")
    k: int = Field(default=5, ge=1, le=MAX_K, description="How many chunks to return.")
    pipeline: str | None = Field(default=None, description="Which pipeline (default: the only one, or `demo`).")
    session: str | None = Field(
        default=None, max_length=MAX_SESSION_CHARS, description="An opaque key of the caller's session."
    )


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=4, ge=1, le=20, description="How many chunks the answer is drawn from.")
    pipeline: str | None = None
    session: str | None = Field(
        default=None, max_length=MAX_SESSION_CHARS, description="An opaque key of the caller's session."
    )


class SearchMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        # No `<name>_created` series: outside the contract, and every other family of /metrics has none.
        disable_created_metrics()
        lat = METRICS["runtime_ops_search_latency_seconds"]
        res = METRICS["runtime_ops_search_results_total"]
        self.latency = Histogram(lat.name, lat.help, list(lat.labels), buckets=list(lat.buckets), registry=registry)
        self.results = Counter(res.name.removesuffix("_total"), res.help, list(res.labels), registry=registry)


def install_search(app: FastAPI, ops: OpsContext, registry: CollectorRegistry) -> None:
    app.state.searchers = Searchers(ops)
    app.state.search_metrics = SearchMetrics(registry)


async def _searchers(request: Request) -> Searchers:
    searchers: Searchers = request.app.state.searchers
    return searchers


async def _metrics(request: Request) -> SearchMetrics:
    metrics: SearchMetrics = request.app.state.search_metrics
    return metrics


def _served(spec: PipelineSpec, routed: RolloutSearch, query: str, k: int, session: str | None) -> Served:
    try:
        return routed.search(query, k, request_id=new_request_id(), session=session)
    except NoServingIndex as exc:
        raise HTTPException(503, str(exc)) from None
    except VectorStoreError as exc:
        raise HTTPException(503, f"pipeline {spec.name}: vector store unavailable: {exc}") from None


@router.post("/api/search")
def search(
    body: SearchRequest,
    caller: SearchKey,
    searchers: Annotated[Searchers, Depends(_searchers)],
    metrics: Annotated[SearchMetrics, Depends(_metrics)],
) -> dict[str, Any]:
    started = time.perf_counter()
    spec, routed = searchers.routed(body.pipeline)
    served = _served(spec, routed, body.query, body.k, body.session)
    result, hits = served.result, served.hits
    took = time.perf_counter() - started
    metrics.latency.labels(spec.name, "search").observe(took)
    metrics.results.labels(spec.name, str(result.model_version)).inc(len(hits))
    return {
        "request_id": served.request_id,
        "pipeline": result.pipeline,
        "model_version": result.model_version,
        "index_id": result.index_id,
        "arm": served.arm,
        "served_by": served.served_by,
        "results": served.results(),
        "took_ms": round(took * 1000, 2),
    }


@router.post("/api/answer")
def answer(
    body: AnswerRequest,
    caller: SearchKey,
    searchers: Annotated[Searchers, Depends(_searchers)],
    metrics: Annotated[SearchMetrics, Depends(_metrics)],
    ops: Annotated[OpsContext, Depends(get_ops)],
) -> dict[str, Any]:
    started = time.perf_counter()
    spec, routed = searchers.routed(body.pipeline)
    served = _served(spec, routed, body.question, body.k, body.session)
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
    metrics.latency.labels(spec.name, "answer").observe(took)
    metrics.results.labels(spec.name, str(result.model_version)).inc(len(hits))
    return {
        "request_id": served.request_id,
        "pipeline": result.pipeline,
        "model_version": result.model_version,
        "index_id": result.index_id,
        "arm": served.arm,
        "served_by": served.served_by,
        "answer": answered.text,
        "answerer": answered.answerer,
        "endpoint_error": answered.endpoint_error,
        # One per passage (overlapping chunks of a document are one), numbered as the model prompt numbers them.
        "sources": served.sources(answered.sources()),
        "took_ms": round(took * 1000, 2),
    }
