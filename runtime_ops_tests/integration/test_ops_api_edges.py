"""The ops API's edges in-process (FastAPI's TestClient, real PostgreSQL and Redis): a link rejection needs a reason
as the API's does; security headers on every response, HSTS when served over https; the Swagger page loads nothing
from another origin; with REDIS_URL two app instances (two replicas) share the refusal limiter's buckets."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from runtime_ops.api import deps
from runtime_ops.api.app import create_app
from runtime_ops.approvals import links
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops_tests.support.approvals_support import FakeClock, open_pending
from runtime_ops_tests.support.slack_signing import interaction_body, sign


@pytest.fixture
def store(env: Any, postgres_url: str) -> Iterator[StateStore]:
    env(database_url=postgres_url, RUNTIME_OPS_APPROVERS="U2")
    opened = open_store(get_settings().resolved_database_url, get_settings(), pipeline=None)
    yield opened
    opened.engine.dispose()


SIGNING = "slack-signing-secret"


def _link(app: Any, request: dict[str, Any], approver: str, clock: FakeClock) -> str:
    expires = clock.now().replace(year=clock.now().year + 1)
    secret = app.state.ops.link_secret
    return links.issue(secret, request_id=request["id"], approver=approver, digest=request["candidate_digest"],
                       expires_at=expires)  # fmt: skip


# ---------------------------------------------------------------------------------------------- link rejections


def test_a_link_rejection_without_a_reason_is_a_400_and_the_link_still_decides(store: StateStore) -> None:
    clock = FakeClock()
    app = create_app(get_settings(), clock=clock.now)
    request = open_pending(store.scoped("demo"), RequestPolicy(approvers=("U2",)), now=clock.now())
    token = _link(app, request, "U2", clock)
    with TestClient(app) as client:
        page = client.get(f"/approvals/{token}")
        assert "Reason (required to reject)" in page.text
        for blank in ({}, {"reason": ""}, {"reason": "   \n "}):
            reply = client.post(f"/approvals/{token}", data={"action": "reject", **blank})
            assert reply.status_code == 400, reply.text
            assert "A rejection needs a reason" in reply.text
        assert store.requests.get_request(request["id"])["status"] == "pending"
        assert store.votes.for_request(request["id"]) == []
        # The same link, with a reason, decides: nothing of the refused attempts was used up.
        reply = client.post(f"/approvals/{token}", data={"action": "reject", "reason": "recall@5 regressed"})
        assert reply.status_code == 200, reply.text
    decided = store.requests.get_request(request["id"])
    assert (decided["status"], decided["decision_reason"]) == ("rejected", "recall@5 regressed")


def test_text_the_store_cannot_hold_is_a_4xx_on_every_decision_route(env: Any, postgres_url: str) -> None:
    env(database_url=postgres_url, RUNTIME_OPS_APPROVERS="U2,U3", SLACK_SIGNING_SECRET=SIGNING)
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline=None)
    clock = FakeClock()
    app = create_app(get_settings(), clock=clock.now)
    request = open_pending(store.scoped("demo"), RequestPolicy(approvers=("U2", "U3")), now=clock.now())
    token = _link(app, request, "U2", clock)
    operator = {"Authorization": f"Bearer {store.api_keys.create('op', ['decide'], approver='U3').key}"}
    click = interaction_body(
        request["id"], "approve", "U\u00002", message_ts="1.1", action_ts="1.2", channel_id="C1",
        response_url="https://hooks.slack.com/actions/T/1/x",
    )  # fmt: skip
    signed = {**sign(SIGNING, click, int(clock.now().timestamp())), "content-type": "application/x-www-form-urlencoded"}
    with TestClient(app, raise_server_exceptions=False) as client:
        link = client.post(f"/approvals/{token}", data={"action": "reject", "reason": "regressed\u0000"})
        assert link.status_code == 400 and "a NUL character" in link.text
        too_long = client.post(f"/approvals/{token}", data={"action": "reject", "reason": "x" * 2001})
        assert too_long.status_code == 400 and "within 2000" in too_long.text
        api = client.post(f"/api/approvals/{request['id']}/reject", json={"reason": "\u0000"}, headers=operator)
        assert api.status_code == 422 and "NUL" in api.text
        slack = client.post("/slack/interactions", content=click, headers=signed)
        assert slack.status_code == 400 and "field user.id contains a NUL character" in slack.json()["error"]
    assert store.requests.get_request(request["id"])["status"] == "pending"
    assert store.votes.for_request(request["id"]) == []
    store.engine.dispose()


# ---------------------------------------------------------------------------------------------- headers

SECURITY = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def _assert_secured(reply: Any, *, hsts: bool) -> None:
    for name, value in SECURITY.items():
        assert reply.headers.get(name) == value, (reply.request.url, name, dict(reply.headers))
    policy = reply.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
    assert ("strict-transport-security" in reply.headers) == hsts, dict(reply.headers)
    if hsts:
        assert re.fullmatch(r"max-age=\d{8,}", reply.headers["strict-transport-security"])


@pytest.mark.parametrize("public_url", ["http://127.0.0.1:8000", "https://ops.example.com"])
def test_every_response_carries_security_headers_and_hsts_only_over_https(
    env: Any, postgres_url: str, public_url: str
) -> None:
    env(
        database_url=postgres_url,
        RUNTIME_OPS_PUBLIC_URL=public_url,
        RUNTIME_OPS_ALERT_TOKEN="alert-token",
        RUNTIME_OPS_APPROVERS="U2",
    )
    hsts = public_url.startswith("https://")
    with TestClient(create_app(get_settings())) as client:
        replies = [
            client.get("/healthz"),  # JSON, 200
            client.get("/api/approvals"),  # JSON, 401
            client.post("/alerts/alertmanager", headers={"Authorization": "Bearer alert-token"}, content=b"{"),  # 400
            client.post("/api/search", content=b"x" * (65 * 1024)),  # 413 from the body limit, before any route
            client.get("/approvals/not-a-token"),  # the approval page, 403
            client.get("/nowhere"),  # 404
        ]
    assert [r.status_code for r in replies] == [200, 401, 400, 413, 403, 404]
    for reply in replies:
        _assert_secured(reply, hsts=hsts)
        assert reply.headers["cache-control"] == "no-store"
    assert "form-action 'self'" in replies[4].headers["content-security-policy"]  # the page keeps its own policy


def test_a_500_carries_them_too(env: Any, postgres_url: str) -> None:
    env(database_url=postgres_url, RUNTIME_OPS_ALERT_TOKEN="alert-token")
    app = create_app(get_settings())

    def broken() -> None:
        raise RuntimeError("a bug in a route")

    app.dependency_overrides[deps.get_settings] = broken  # the alert route's first dependency
    with TestClient(app, raise_server_exceptions=False) as client:
        reply = client.post("/alerts/alertmanager", content=b"{}")
    assert reply.status_code == 500
    _assert_secured(reply, hsts=False)


def test_hsts_follows_https_from_a_trusted_proxy_only(env: Any, postgres_url: str) -> None:
    env(database_url=postgres_url, FORWARDED_ALLOW_IPS="10.1.2.3")
    https = {"X-Forwarded-Proto": "https"}
    with TestClient(create_app(get_settings()), client=("10.1.2.3", 40000)) as proxied:
        _assert_secured(proxied.get("/healthz", headers=https), hsts=True)
        _assert_secured(proxied.get("/healthz"), hsts=False)
    with TestClient(create_app(get_settings()), client=("10.9.9.9", 40000)) as direct:
        _assert_secured(direct.get("/healthz", headers=https), hsts=False)  # not a proxy we trust


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_limit(env: Any, postgres_url: str) -> None:
    env(database_url=postgres_url, FORWARDED_ALLOW_IPS="10.1.2.0/24")
    app = create_app(get_settings(), clock=FakeClock().now)
    burst = app.state.ops.refusals.policy.burst
    with TestClient(app, client=("10.1.2.3", 40000)) as proxy:  # the proxy, forwarding its clients' addresses
        codes = [
            proxy.get("/api/approvals", headers={"X-Forwarded-For": f"198.51.100.{i % 2}"}).status_code
            for i in range(2 * burst)
        ]
        assert codes == [401] * (2 * burst)  # two clients, a bucket each
        assert proxy.get("/api/approvals", headers={"X-Forwarded-For": "198.51.100.0"}).status_code == 429
        assert proxy.get("/api/approvals", headers={"X-Forwarded-For": "198.51.100.7"}).status_code == 401


# ---------------------------------------------------------------------------------------------- /docs


def test_the_swagger_page_loads_nothing_from_another_origin(store: StateStore) -> None:
    key = {"Authorization": f"Bearer {store.api_keys.create('reader', ['read']).key}"}
    with TestClient(create_app(get_settings())) as client:
        page = client.get("/docs", headers=key)
        assert page.status_code == 200
        loads = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", page.text)
        assert loads and all(u.startswith(("/", "data:")) for u in loads), loads
        assert "cdn" not in page.text.lower() and "fastapi.tiangolo.com" not in page.text
        policy = page.headers["content-security-policy"]
        assert "script-src 'self' 'sha256-" in policy and "http" not in policy
        for url in (u for u in loads if u.startswith("/")):
            asset = client.get(url, headers=key)
            assert asset.status_code == 200 and len(asset.content) > 10_000, url
            assert client.get(url).status_code == 401  # behind the read key like the page
        assert "SwaggerUIBundle" in client.get("/docs/assets/swagger-ui-bundle.js", headers=key).text


# ---------------------------------------------------------------------------------------------- shared buckets


def test_with_redis_two_replicas_share_the_refusal_limit(env: Any, postgres_url: str, redis_url: str) -> None:
    env(database_url=postgres_url, REDIS_URL=redis_url)
    clock = FakeClock()
    first, second = create_app(get_settings(), clock=clock.now), create_app(get_settings(), clock=clock.now)
    burst = first.state.ops.refusals.policy.burst
    with TestClient(first) as a, TestClient(second) as b:
        # The same client, alternately on either replica: the limit is the one stated, not twice it.
        codes = [(a if i % 2 else b).get("/api/approvals").status_code for i in range(burst + 4)]
        assert codes[:burst] == [401] * burst and codes[burst:] == [429] * 4, codes
        clock.advance(seconds=3)  # refilled at 1 a second, on both
        assert [a.get("/api/approvals").status_code, b.get("/api/approvals").status_code] == [401, 401]
