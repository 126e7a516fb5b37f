"""No anonymous reads: every `/api/*` route, `/metrics`, `/docs` and `/openapi.json` of the ops API answers 401 without
a key and 403 with a key lacking its scope; the only routes without a key are the ones authenticated by their
own signature or token, and the two health probes (the app `runtime-ops serve` runs, on a real PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from runtime_ops.api.app import create_app
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.approvals_support import ready

# Route -> the scope its key needs.
KEYED = {
    ("GET", "/api/approvals"): "read",
    ("GET", "/api/alerts"): "read",
    ("GET", "/metrics"): "read",
    ("GET", "/openapi.json"): "read",
    ("GET", "/docs"): "read",
    ("GET", "/docs/assets/swagger-ui-bundle.js"): "read",
    ("GET", "/docs/assets/swagger-ui.css"): "read",
    ("POST", "/api/search"): "search",
    ("POST", "/api/answer"): "search",
    ("POST", "/api/feedback"): "search",
    ("POST", "/api/approvals/{request_id}/{action}"): "decide",
    ("GET", "/api/approvals/{request_id}"): "read",
    ("GET", "/api/rollouts"): "read",
    ("GET", "/api/rollouts/{rollout_id}"): "read",
    ("POST", "/api/rollouts/{rollout_id}/stop"): "decide",
    ("POST", "/api/rollback"): "decide",
}
# A path with parameters is called at this URL; what a key with the scope gets there (nothing to find: 404; no
# production model to roll back: 409).
URLS = {
    "/api/approvals/{request_id}": ("/api/approvals/apr-nonesuch", 404),
    "/api/rollouts/{rollout_id}": ("/api/rollouts/999999", 404),
    "/api/rollouts/{rollout_id}/stop": ("/api/rollouts/999999/stop", 404),
    "/api/rollback": ("/api/rollback", 409),
}
DECIDE = "/api/approvals/{request_id}/{action}"
QUERIES = ("/api/search", "/api/answer")
# Authenticated otherwise: Slack's signature, the link's signature, the webhooks' tokens; or saying only up/down.
OWN_AUTH = {
    ("POST", "/slack/interactions"),
    ("GET", "/approvals/{token}"),
    ("POST", "/approvals/{token}"),
    ("POST", "/alerts/alertmanager"),
    ("POST", "/webhooks/landing"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
}
BODIES: dict[str, Any] = {
    "/api/search": {"query": "json"},
    "/api/answer": {"question": "json?"},
    "/api/feedback": {"request_id": "q_01JEH6Q4Z0R8W5N2K7M9P3T6XA", "chunk_id": 1, "signal": "click"},
    "/api/rollouts/{rollout_id}/stop": {"reason": "checking"},
    "/api/rollback": {"pipeline": "demo", "to_version": 1, "reason": "checking"},
}


@pytest.fixture
def client(env, postgres_url) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    env(database_url=postgres_url, RUNTIME_OPS_ALERT_TOKEN="alert-token")
    with TestClient(create_app(get_settings())) as client:  # started as `runtime-ops serve` starts it
        yield client


def _call(client: TestClient, method: str, path: str, headers: dict[str, str] | None = None) -> Any:
    url = "/api/approvals/apr-nonesuch/approve" if path == DECIDE else URLS.get(path, (path, 0))[0]
    return client.request(method, url, json=BODIES.get(path), headers=headers or {})


def _routes(routes: list[Any]) -> set[tuple[str, str]]:
    """(method, path) of every API route, through included routers (FastAPI keeps them as wrappers)."""
    found: set[tuple[str, str]] = set()
    for r in routes:
        if isinstance(r, APIRoute):
            found |= {(m, r.path) for m in r.methods}
        elif hasattr(r, "original_router"):
            found |= _routes(r.original_router.routes)
    return found


def test_every_route_is_keyed_or_authenticated_by_its_own_means(client: TestClient) -> None:
    app: Any = client.app
    routes = _routes(app.routes)
    assert routes == set(KEYED) | OWN_AUTH, "a new route must be in KEYED (with its scope) or OWN_AUTH"
    # FastAPI's own open schema and docs routes are off.
    assert all(getattr(r, "path", "") not in ("/redoc", "/docs/oauth2-redirect") for r in app.routes)


@pytest.mark.parametrize(("method", "path"), sorted(KEYED))
def test_no_key_is_401_a_key_without_the_scope_is_403_the_scope_gets_in(
    client: TestClient, postgres_url: str, method: str, path: str
) -> None:
    store = open_store(postgres_url, get_settings(), pipeline=None)
    scope = KEYED[(method, path)]
    other = "search" if scope == "read" else "read"
    wrong = {"Authorization": f"Bearer {store.api_keys.create('wrong', [other]).key}"}
    approver = "U1" if scope == "decide" else None  # a deciding key says who it decides as
    right = {"Authorization": f"Bearer {store.api_keys.create('right', [scope], approver=approver).key}"}

    anonymous = _call(client, method, path)
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
    assert "approvers" not in anonymous.text and "runtime_ops_" not in anonymous.text  # nothing leaks
    assert _call(client, method, path, {"Authorization": "Bearer rok_00000000_forged"}).status_code == 401
    refused = _call(client, method, path, wrong)
    assert refused.status_code == 403 and f"lacks the {scope!r} scope" in refused.json()["detail"]
    # With the scope: served (the query routes answer 503 here: no pipeline serves an index yet; feedback, 410: the
    # request id was issued in 2024; the decision, 404: there is no such request).
    served = _call(client, method, path, right)
    expected = 410 if path == "/api/feedback" else 503 if path in QUERIES else 404 if path == DECIDE else 200
    expected = URLS[path][1] if path in URLS else expected
    assert served.status_code == expected, served.text
    if path == "/openapi.json":
        assert "/api/search" in served.json()["paths"]
    if path == "/docs":
        assert "swagger-ui" in served.text and "/api/search" in served.text  # the schema inline
    store.engine.dispose()


def test_the_health_probes_need_no_key_and_say_nothing_else(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    # Ready, and which pipeline serves no index yet (the demo has none here): nothing else.
    assert ready(lambda: client.get("/readyz")).json() == {"status": "ready", "note": "no serving index yet: demo"}


@pytest.mark.parametrize(
    "exposed",
    [
        {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APPROVAL_CHANNEL": "C1"},
        {"SLACK_SIGNING_SECRET": "signing"},
        {"RUNTIME_OPS_PUBLIC_URL": "https://ops.example.com"},
    ],
)
def test_anyone_may_approve_is_refused_at_start_once_slack_or_a_public_url_is_configured(
    env, postgres_url, exposed: dict[str, str]
) -> None:  # type: ignore[no-untyped-def]
    from runtime_ops.definitions import build_definitions
    from runtime_ops.pipeline.resolve import OpenApprovals

    env(database_url=postgres_url, **exposed)
    with pytest.raises(OpenApprovals, match=r"defs\.yaml: pipeline 'demo' names no approvers.*RUNTIME_OPS_APPROVERS"):
        create_app(get_settings())  # `runtime-ops serve`
    with pytest.raises(OpenApprovals, match=r"names no approvers.*approvals\.approvers in its defs\.yaml"):
        build_definitions(get_settings())  # the code location: daemon, webserver, run workers
    env(database_url=postgres_url, RUNTIME_OPS_APPROVERS="U1,U2", **exposed)
    create_app(get_settings())
    build_definitions(get_settings())
