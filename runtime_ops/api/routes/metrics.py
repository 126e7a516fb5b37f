"""`GET /metrics`: Prometheus metrics of the state store and the Dagster instance (`RuntimeOpsCollector`); an API
key with the `read` scope (Prometheus sends it with `authorization: {credentials_file: ...}`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from runtime_ops.api.auth import require_scope
from runtime_ops.observability.collector import MinQueries, RuntimeOpsCollector, metrics_registry
from runtime_ops.store import StateStore

router = APIRouter(tags=["metrics"])


def install_metrics(
    app: FastAPI,
    store: StateStore,
    dagster_instance: Any,
    now: Callable[[], datetime],
    min_queries: MinQueries | None = None,
) -> None:
    """Build the collector once per app: it caches what it reads from the Dagster instance between scrapes.
    `min_queries`: what a pipeline's rollout (or ramp stage) needs before its verdict counts."""
    collector = RuntimeOpsCollector(
        store, (lambda: dagster_instance) if dagster_instance is not None else None, clock=now, min_queries=min_queries
    )
    app.state.metrics_collector = collector
    app.state.metrics_registry = metrics_registry(collector)


async def _collector(request: Request) -> RuntimeOpsCollector:
    collector: RuntimeOpsCollector = request.app.state.metrics_collector
    return collector


async def _registry(request: Request) -> CollectorRegistry:
    registry: CollectorRegistry = request.app.state.metrics_registry
    return registry


@router.get("/metrics", dependencies=[Depends(require_scope("read"))])
def metrics(
    collector: Annotated[RuntimeOpsCollector, Depends(_collector)],
    registry: Annotated[CollectorRegistry, Depends(_registry)],
) -> Response:
    try:
        body = generate_latest(registry)
    except Exception as exc:  # each source is guarded in the collector; this is the last resort, still no 500
        collector.error("render", exc)
        fallback = CollectorRegistry(auto_describe=False)
        for family in collector.health():
            fallback.register(_Fixed(family))
        body = generate_latest(fallback)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


class _Fixed:
    """A collector that yields one ready family (the /metrics fallback)."""

    def __init__(self, family: Metric) -> None:
        self.family = family

    def collect(self) -> Iterator[Metric]:
        yield self.family
