"""The signed-link approval page in a real browser: headless Debian Chromium driven by Playwright (sync API)
against the ops API on a real uvicorn server and a real PostgreSQL state store, with no Slack configured.

Chromium is Debian's (`/usr/bin/chromium`), never Playwright's own download. One browser context serves the whole
module; every test gets its own database, API server, clock and page. A missing Chromium fails these tests (naming
the package to install): they never skip.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Page, Response, ViewportSize
from sqlalchemy import select

from runtime_ops.approvals.announce import Announcer
from runtime_ops.approvals.links import LOCAL_APPROVER
from runtime_ops.approvals.requests import request_policy
from runtime_ops.components.loading import get_spec
from runtime_ops.settings import Settings, get_settings, load_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store import schema as t
from runtime_ops_tests.support.approvals_support import QUESTION_SET, QUESTIONS, ApiServer, FakeClock, open_pending
from runtime_ops_tests.support.chromium import chromium
from runtime_ops_tests.support.servers import free_port

VIEWPORT: ViewportSize = {"width": 1000, "height": 900}
# The README's screenshot is refreshed only on request (RUNTIME_OPS_UPDATE_DOCS=1), so tests leave the tree clean.
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "approval-page.png"
# Read at import: the tests' settings fixtures clear RUNTIME_OPS_* variables before a test runs.
UPDATE_DOCS = os.environ.get("RUNTIME_OPS_UPDATE_DOCS") == "1"


ICON_LOADS = """() => new Promise(done => {
    const img = new Image();
    img.onload = () => done(img.naturalWidth > 0);
    img.onerror = () => done(false);
    img.src = document.querySelector("link[rel=icon]").href;
})"""


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """One headless Chromium (fresh profile dir) for the module."""
    with chromium(tmp_path_factory.mktemp("chromium-profile"), VIEWPORT, 15_000) as context:
        yield context


@dataclass
class Traffic:
    """What the browser asked for and complained about while a test ran: every response (URL, status) and
    every console error (a CSP refusal or a failed load is one)."""

    responses: list[tuple[str, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def record(self, page: Page) -> None:
        page.on("response", lambda r: self.responses.append((r.url, r.status)))
        page.on("console", self._console)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def paths(self) -> list[str]:
        return [urlsplit(url).path for url, _ in self.responses]


@pytest.fixture
def traffic() -> Traffic:
    return Traffic()


@pytest.fixture
def page(browser: BrowserContext, traffic: Traffic) -> Iterator[Page]:
    page = browser.new_page()
    traffic.record(page)
    yield page
    for p in browser.pages:  # this test's page and any tab it opened
        p.close()


@dataclass
class World:
    settings: Settings
    store: StateStore
    api: ApiServer
    clock: FakeClock
    request: dict[str, Any]

    def link(self, approver: str, request: dict[str, Any] | None = None) -> str:
        """The personal signed link, exactly as the announcer builds it (the app's own link secret)."""
        announcer = Announcer(self.store, self.settings.resolved_link_secret(), self.api.url, self.settings.dagster_url)
        return announcer.link(request or self.request, approver, self.clock.now())

    def open_second(self, seed: str = "b", **policy_changes: Any) -> dict[str, Any]:
        policy = dataclasses.replace(request_policy(get_spec(settings=self.settings)), **policy_changes)
        return open_pending(self.store, policy, now=self.clock.now(), seed=seed, production_model=True)

    def production_version(self, request: dict[str, Any] | None = None) -> int:
        report = self.store.evaluations.get_eval_report((request or self.request)["eval_report_id"])
        assert report is not None and report["production_version"] is not None
        return report["production_version"]

    def dagster(self, path: str) -> str:
        return f"{self.settings.dagster_url}{path}"

    def get(self, request_id: str | None = None) -> dict[str, Any]:
        request = self.store.requests.get_request(request_id or self.request["id"])
        assert request is not None
        return request

    def link_uses(self) -> list[dict[str, Any]]:
        with self.store.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(select(t.link_uses))]

    def attempts(self) -> list[dict[str, Any]]:
        return [r for r in self.store.audit_log.records() if r["event"] == "attempt"]

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a decision could change (the request's audit-chain head moves with every attempt)."""
        rid = self.request["id"]
        decided = [r for r in self.store.audit_log.records() if r["event"] == "decided"]
        request = {k: v for k, v in self.get().items() if k not in ("audit_seq", "audit_hash")}
        return request, self.store.votes.for_request(rid), self.link_uses(), decided


@pytest.fixture
def world(env, postgres_url) -> Iterator[World]:  # type: ignore[no-untyped-def]
    port = free_port()
    env(
        database_url=postgres_url,
        RUNTIME_OPS_APPROVERS="alice,bob",
        RUNTIME_OPS_PUBLIC_URL=f"http://127.0.0.1:{port}",
    )
    settings = load_settings()
    assert settings.slack_bot_token is None and settings.slack_signing_secret is None  # no Slack at all
    store = open_store(settings.resolved_database_url, get_settings())
    clock = FakeClock()
    policy = request_policy(get_spec(settings=settings))
    pending = open_pending(store, policy, now=clock.now(), production_model=True)
    api = ApiServer(settings, clock)
    api.port, api.url = port, f"http://127.0.0.1:{port}"
    with api:
        yield World(settings, store, api, clock, pending)


# ---------------------------------------------------------------------------------------------- helpers
def visit(page: Page, url: str) -> Response:
    response = page.goto(url, wait_until="load")
    assert response is not None
    return response


def submit(page: Page, button: str) -> Response:
    """Click a form button and return the response of the POST navigation it causes."""
    with page.expect_navigation(wait_until="load") as nav:
        page.click(button)
    response = nav.value
    assert response is not None and response.request.method == "POST"
    return response


def outcome(page: Page) -> str:
    return page.inner_text("#outcome")


def approve_through_page(page: Page, link: str) -> Response:
    assert visit(page, link).status == 200
    return submit(page, "#approve")


# ---------------------------------------------------------------------------------------------- tests
def test_alice_sees_the_evidence_and_approves(world: World, page: Page, traffic: Traffic, tmp_path: Path) -> None:
    link = world.link("alice")
    assert link.startswith(f"{world.api.url}/approvals/")
    response = visit(page, link)
    assert response.status == 200
    rid = world.request["id"]

    # the evidence: which request, for whom, the metrics side by side with deltas, the verdict
    assert rid in page.inner_text("body")
    assert "alice" in page.inner_text("body")
    assert f"v{world.request['candidate_version']}" in page.inner_text("h1")
    headers = [h.strip() for h in page.locator("#metrics thead th").all_inner_texts()]
    # every number names the set it was scored on; production's were re-scored on it (not its own report's)
    on = f"set {QUESTION_SET[:12]}, {QUESTIONS} questions"
    assert headers == [
        "metric",
        f"candidate v{world.request['candidate_version']} ({on})",
        f"production v{world.production_version()} (re-scored on {on})",
        "delta",
    ]
    assert f"scored on evaluation {on}" in page.inner_text("#evaluated-on")
    assert "can differ from those in its own evaluation report" in page.inner_text("#evaluated-on")
    rows = {
        cells[0]: cells[1:]
        for cells in (
            [c.strip() for c in r.locator("td").all_inner_texts()] for r in page.locator("#metrics tbody tr").all()
        )
    }
    assert rows == {
        "ndcg@5": ["0.6100", "0.6000", "+0.0100"],
        "recall@5": ["0.7100", "0.7000", "+0.0100"],
        "mrr": ["0.5600", "0.5500", "+0.0100"],
    }
    assert page.locator("#metrics .up").count() == 3  # improvements are marked as such
    # the verdict in words: better (the interval is above 0) but below the auto-approve margin, so a person decides
    assert page.inner_text("#verdict").startswith("better, but below the auto-approve margin +0.020: ndcg@5 +0.010")
    assert page.inner_text("#outcome-words") == "better, but below the auto-approve margin +0.020"
    assert "ndcg@5 +0.010 (95% CI +0.002 to +0.018, 45 questions)" in page.inner_text("#interval")
    # each changed question: better or worse, the question, its relevant document's rank under both models
    changed = [li.strip() for li in page.locator("#changed li").all_inner_texts()]
    assert changed == [
        "worse: “what does a lease protect” — guide/lease.md: 1 → not in top 10",
        "better: “how do I rotate the signing keys” — guide/keys.md: 3 → 1",
    ]
    assert page.locator("#changed .down").all_inner_texts() == ["worse"]
    assert "production → candidate" in page.inner_text("#changed .label").lower()  # (the label is upper-cased)
    assert page.locator("#approve").is_visible() and page.locator("#reject").is_visible()
    assert page.locator("#progress").count() == 0  # one approval is enough: no M-of-N progress line
    # the evidence leads on to Dagster: the run that opened the request, the candidate model, the report
    pipeline = world.request["pipeline"]
    assert page.get_attribute("#run-link", "href") == world.dagster("/runs/run-1")
    assert page.get_attribute("#candidate-link", "href") == world.dagster(f"/assets/{pipeline}/embedding_model")
    assert page.get_attribute("#report-link", "href") == world.dagster(f"/assets/{pipeline}/evaluation_report")
    # An inline icon: a browser with a tab strip asks for /favicon.ico (a 404: no such route) only when a page
    # names none. Headless Chromium asks for no icon at all, so the page loads the one it names as an image
    # would be loaded: it must decode and be allowed by the page's own CSP (a refusal is a console error).
    assert (page.get_attribute("link[rel=icon]", "href") or "").startswith("data:image/svg+xml,")
    assert page.evaluate(ICON_LOADS) is True
    assert "/favicon.ico" not in traffic.paths()
    assert traffic.errors == []

    shot = DOCS_SCREENSHOT if UPDATE_DOCS else tmp_path / "approval-page.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=False)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000

    response = submit(page, "#approve")
    assert response.status == 200
    assert page.title() == "Approved"
    assert re.search(rf"{rid} approved by alice", outcome(page))
    assert "ok" in (page.get_attribute("#outcome", "class") or "")
    # what happens next and when: the approvals sensor's interval (RUNTIME_OPS_SENSOR_INTERVAL=1s in tests)
    assert page.inner_text("#next").endswith(
        "The approvals sensor launches the promotion run within ~1 s; production moves to "
        f"v{world.request['candidate_version']} when that run succeeds. Watch the run in Dagster."
    )
    runs = world.dagster(f"/runs?q%5B%5D=tag%3Aruntime_ops%2Fapproval_id%3D{rid}")  # the UI's tag filter
    assert page.get_attribute("#promotion-link", "href") == runs
    assert page.get_attribute("#run-link", "href") == world.dagster("/runs/run-1")
    assert page.locator("#report-link").count() == 1
    assert [(url, status) for url, status in traffic.responses if status >= 400] == []
    assert "/favicon.ico" not in traffic.paths() and traffic.errors == []

    request = world.get()
    assert request["status"] == "approved" and request["decided_by"] == "alice"
    assert request["decided_at"] == world.clock.now() and request["decision_reason"] is None
    [vote] = world.store.votes.for_request(rid)
    assert (vote["actor"], vote["vote"], vote["channel"]) == ("alice", "approve", "link")
    [use] = world.link_uses()
    assert (use["request_id"], use["approver"], use["action"]) == (rid, "alice", "approve")
    [attempt] = world.attempts()
    assert (attempt["request_id"], attempt["actor"], attempt["channel"], attempt["outcome"]) == (
        rid,
        "alice",
        "link",
        "accepted",
    )
    [decided] = [r for r in world.store.audit_log.records(rid) if r["event"] == "decided"]
    assert (decided["outcome"], decided["actor"], decided["channel"]) == ("approved", "alice", "link")
    assert world.store.audit_log.verify().ok


def test_a_used_link_is_refused_and_a_replayed_post_changes_nothing(world: World, page: Page) -> None:
    link = world.link("alice")
    stale = page.context.new_page()  # a second tab showing the same link, left open before the decision
    assert visit(stale, link).status == 200
    assert approve_through_page(page, link).status == 200
    before = world.snapshot()

    # opening the link again: a clear refusal, no form
    response = visit(page, link)
    assert response.status == 409
    assert page.title() == "Link already used"
    assert "already used to approve" in outcome(page) and "Each link decides once" in outcome(page)
    assert page.locator("#approve").count() == 0 and page.locator("#reject").count() == 0

    # the stale tab posts the same link again: refused, still exactly one vote
    response = submit(stale, "#approve")
    assert response.status == 409
    assert "already used" in outcome(stale)
    # ... and so does a replayed POST of a different action
    replay = page.context.request.post(link, form={"action": "reject", "reason": "replay"})
    assert replay.status == 409 and "already used" in replay.text()

    assert world.snapshot() == before
    assert len(world.store.votes.for_request(world.request["id"])) == 1
    assert [(a["outcome"], a["channel"]) for a in world.attempts()] == [
        ("accepted", "link"),
        ("link_reused", "link"),
        ("link_reused", "link"),
    ]


def test_an_expired_link_is_refused_and_changes_nothing(world: World, page: Page) -> None:
    link = world.link("alice")
    assert visit(page, link).status == 200  # the approver opens the page ...
    before = world.snapshot()
    expire_at = world.request["expire_at"]
    assert expire_at is not None
    world.clock.current = expire_at  # ... and comes back when the link (valid until expire_at) has expired
    world.clock.advance(seconds=1)

    response = submit(page, "#approve")  # the POST from the page left open
    assert response.status == 410
    assert page.title() == "Link refused"
    assert f"expired at {expire_at:%Y-%m-%d %H:%M} UTC" in outcome(page)
    assert "refused" in (page.get_attribute("#outcome", "class") or "")

    other = page.context.new_page()
    response = visit(other, link)  # opening it afresh
    assert response.status == 410 and "expired" in outcome(other)
    assert other.locator("#approve").count() == 0

    assert world.snapshot() == before
    assert world.get()["status"] == "pending" and world.store.votes.for_request(world.request["id"]) == []
    [attempt] = world.attempts()
    assert (attempt["channel"], attempt["outcome"], attempt["request_id"]) == ("link", "expired_link", None)
    assert attempt["detail"]["action"] == "approve" and "expired" in attempt["detail"]["message"]


def test_a_tampered_link_is_refused_and_changes_nothing(world: World, page: Page) -> None:
    link = world.link("alice")
    prefix, token = link.rsplit("/", 1)
    i = 10  # inside the signed payload
    tampered = f"{prefix}/{token[:i]}{'B' if token[i] == 'A' else 'A'}{token[i + 1 :]}"
    assert tampered != link
    before = world.snapshot()

    response = visit(page, tampered)
    assert response.status == 403
    assert page.title() == "Link refused"
    assert "not valid" in outcome(page) and "altered" in outcome(page)
    assert page.locator("#approve").count() == 0 and world.request["id"] not in page.inner_text("body")

    post = page.context.request.post(tampered, form={"action": "approve"})
    assert post.status == 403 and "not valid" in post.text()

    assert world.snapshot() == before
    assert world.get()["status"] == "pending"
    [attempt] = world.attempts()
    assert (attempt["channel"], attempt["outcome"], attempt["actor"]) == ("link", "tampered_link", None)
    assert attempt["detail"]["action"] == "approve"

    # the genuine link still works afterwards
    assert visit(page, link).status == 200


def test_bob_rejects_a_second_request_with_a_reason(world: World, page: Page) -> None:
    second = world.open_second()
    assert second["id"] != world.request["id"]
    response = visit(page, world.link("bob", second))
    assert response.status == 200
    assert second["id"] in page.inner_text("body") and "bob" in page.inner_text("body")
    reason = "recall@5 regressed on the legal subset; re-run with the new corpus"
    page.fill("textarea[name=reason]", reason)

    response = submit(page, "#reject")
    assert response.status == 200
    assert page.title() == "Rejected"
    assert f"{second['id']} rejected by bob" in outcome(page)
    assert page.inner_text("#next").endswith(
        f"Production stays on v{world.production_version(second)} and no promotion run starts. "
        "The approvals sensor removes the canary alias within ~1 s."
    )
    assert page.locator("#promotion-link").count() == 0  # nothing to watch

    request = world.get(second["id"])
    assert request["status"] == "rejected" and request["decided_by"] == "bob"
    assert request["decision_reason"] == reason
    [vote] = world.store.votes.for_request(second["id"])
    assert (vote["actor"], vote["vote"], vote["channel"]) == ("bob", "reject", "link")
    [attempt] = [a for a in world.attempts() if a["request_id"] == second["id"]]
    assert (attempt["actor"], attempt["channel"], attempt["outcome"]) == ("bob", "link", "accepted")
    assert attempt["detail"]["reason"] == reason
    [decided] = [r for r in world.store.audit_log.records(second["id"]) if r["event"] == "decided"]
    assert decided["outcome"] == "rejected" and decided["detail"]["reason"] == reason
    assert world.get()["status"] == "superseded"  # the first request was not touched by bob's vote
    assert world.store.votes.for_request(world.request["id"]) == []


def test_the_local_identity_is_named_as_the_local_operator(world: World, page: Page) -> None:
    # A pipeline without approvers: the approvals sensor prints one link, for the local identity.
    local = world.open_second(approvers=(), escalation_approvers=(), escalate_after=None, tiers=())
    assert visit(page, world.link(LOCAL_APPROVER, local)).status == 200
    assert page.inner_text("#approver") == "the local operator"
    assert submit(page, "#approve").status == 200
    assert outcome(page) == f"{local['id']} approved by the local operator"
    assert world.get(local["id"])["decided_by"] == LOCAL_APPROVER  # the audit keeps the identity itself
    assert "within ~1 s" in page.inner_text("#next")
