"""Hostile input against the ops API (a real uvicorn server, PostgreSQL, a local landing folder and moto's S3): each
gets a 4xx with its reason, never a 5xx; a 200 MB body costs the server no more than a chunk; the landing webhook
writes all of a request or nothing; the approval pages carry their security headers; and nothing else changes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer, ready
from runtime_ops_tests.support.servers import free_port
from runtime_ops_tests.support.slack_signing import signed_headers

SECRET = "hook-secret"
SIGNING = "slack-signing-secret"
HOOK = {"X-Runtime-Ops-Token": SECRET}
JSON_HOOK = {**HOOK, "Content-Type": "application/json"}


@pytest.fixture
def api(env, postgres_url, tmp_path) -> Iterator[ApiServer]:  # type: ignore[no-untyped-def]
    env(
        database_url=postgres_url,
        landing=str(tmp_path / "landing"),
        RUNTIME_OPS_WEBHOOK_SECRET=SECRET,
        RUNTIME_OPS_ALERT_TOKEN="alert-token",
        SLACK_SIGNING_SECRET=SIGNING,
        RUNTIME_OPS_APPROVERS="U1",
    )
    (tmp_path / "landing").mkdir()
    with ApiServer(get_settings()) as server:
        yield server


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _audit_count(postgres_url: str) -> int:
    store = open_store(postgres_url, get_settings(), pipeline=None)
    try:
        return len(store.audit_log.records(None))
    finally:
        store.engine.dispose()


def test_a_non_utf8_slack_body_is_a_401_with_an_audit_record(api: ApiServer, postgres_url: str) -> None:
    body = b"payload=\xff\xfe\xfa"
    headers = signed_headers(SIGNING, body)
    before = _audit_count(postgres_url)
    reply = web.post(f"{api.url}/slack/interactions", content=body, headers=headers, timeout=30)
    assert reply.status_code == 401 and "not UTF-8" in reply.json()["error"]
    assert _audit_count(postgres_url) == before + 1


def test_deeply_nested_json_is_a_400_not_a_recursion_error(api: ApiServer) -> None:
    nested = ("[" * 100_000 + "]" * 100_000).encode()
    alert = web.post(
        f"{api.url}/alerts/alertmanager",
        content=b'{"version": "4", "alerts": ' + nested + b"}",
        headers={"Authorization": "Bearer alert-token", "Content-Type": "application/json"},
        timeout=30,
    )
    assert alert.status_code == 400 and "nested too deeply" in alert.json()["error"]
    landing = web.post(f"{api.url}/webhooks/landing", content=b'{"objects": ' + nested + b"}", headers=JSON_HOOK)
    assert landing.status_code == 400 and "nested too deeply" in landing.json()["error"]


@pytest.mark.parametrize(
    ("objects", "problem"),
    [
        ([{"key": "a\x00b.txt", "content": "x"}], "control character"),
        ([{"key": "a", "content": "x"}, {"key": "a/b", "content": "y"}], "needs it to be a folder"),
        ([{"key": "ok.txt", "content": "x"}, {"key": "d/" + "s" * 300 + ".txt", "content": "y"}], "segment of 304"),
        ([{"key": "ok.txt", "content": "x"}, {"key": "dir", "content": "y"}], "is a folder in the landing"),
        ([{"key": "ok.txt", "content": "x"}, {"key": "ok.txt", "content": "y"}], "more than once"),
        ([{"key": "ok.txt", "content": "x"}, {"key": "old.txt/inner.txt", "content": "y"}], "is a file in the"),
        ([{"key": "ok.txt", "content": "x"}, {"key": ".hidden/x.txt", "content": "y"}], "would be ignored"),
    ],
)
def test_the_landing_webhook_refuses_bad_keys_and_writes_nothing(
    api: ApiServer, tmp_path: Path, objects: list[dict[str, str]], problem: str
) -> None:
    landing = tmp_path / "landing"
    (landing / "dir").mkdir()
    (landing / "dir" / "inside.txt").write_text("a file inside a folder")
    (landing / "old.txt").write_text("an existing file")
    before = _files(landing)
    reply = web.post(f"{api.url}/webhooks/landing", json={"objects": objects}, headers=HOOK, timeout=30)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"].startswith("nothing landed") and any(problem in p for p in reply.json()["problems"])
    assert _files(landing) == before


def test_a_write_that_fails_half_way_is_undone(api: ApiServer, tmp_path: Path, monkeypatch: Any) -> None:
    landing = tmp_path / "landing"
    (landing / "keep").mkdir()
    (landing / "keep" / "a.txt").write_text("the old version")
    old_stat = (landing / "keep" / "a.txt").stat()
    monkeypatch.setenv("RUNTIME_OPS_FAILPOINTS", "landing.write=raise")  # after the first object is written
    objects = [{"key": "keep/a.txt", "content": "a new version"}, {"key": "b.txt", "content": "new"}]
    reply = web.post(f"{api.url}/webhooks/landing", json={"objects": objects}, headers=HOOK, timeout=30)
    assert reply.status_code == 503 and reply.json()["error"].startswith("nothing landed")
    assert _files(landing) == {"keep/a.txt": b"the old version"}  # no b.txt, no stash left behind
    after = (landing / "keep" / "a.txt").stat()
    assert (after.st_size, after.st_mtime_ns) == (old_stat.st_size, old_stat.st_mtime_ns), "the same version"
    monkeypatch.delenv("RUNTIME_OPS_FAILPOINTS")
    reply = web.post(f"{api.url}/webhooks/landing", json={"objects": objects}, headers=HOOK, timeout=30)
    assert reply.status_code == 202 and len(reply.json()["landed"]) == 2
    assert _files(landing) == {"b.txt": b"new", "keep/a.txt": b"a new version"}


def _peak_rss_mb(pid: int) -> float:
    """The process's high-water mark of resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc")


@pytest.fixture
def served(env, postgres_url, tmp_path) -> Iterator[tuple[str, int]]:  # type: ignore[no-untyped-def]
    """`runtime-ops serve` in a process of its own (its memory is measured apart from the client's)."""
    env(
        database_url=postgres_url,
        landing=str(tmp_path / "landing"),
        RUNTIME_OPS_WEBHOOK_SECRET=SECRET,
        RUNTIME_OPS_ALERT_TOKEN="alert-token",
        SLACK_SIGNING_SECRET=SIGNING,
        RUNTIME_OPS_APPROVERS="U1",
    )
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime_ops.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if web.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


BODY_ROUTES = ("/slack/interactions", "/webhooks/landing", "/alerts/alertmanager", "/api/search")


def test_a_200_mb_body_is_refused_before_it_is_read(served: tuple[str, int]) -> None:
    """On each route in turn, one server: a route that read the body would raise the peak by ~200 MB whatever the
    routes before it held, so each route's growth is measured from the peak the ones before it left."""
    from runtime_ops.api.guards import limit_for

    url, pid = served
    chunk = b"x" * (1024 * 1024)

    def headers(path: str) -> dict[str, str]:
        # The landing's token and JSON content type pass, so its body limit is what refuses.
        return {**(JSON_HOOK if path == "/webhooks/landing" else HOOK), "Authorization": "Bearer alert-token"}

    # Measured from a server past its warm-up and every route's first use (imports, pools): what grows after is
    # the body's cost alone.
    ready(lambda: web.get(f"{url}/readyz", timeout=10))
    for path in BODY_ROUTES:
        web.post(f"{url}{path}", content=b"{}", headers=headers(path), timeout=30)

    def body() -> Iterator[bytes]:
        for _ in range(200):
            yield chunk

    for path in BODY_ROUTES:
        before = _peak_rss_mb(pid)
        # Declared: refused from the header alone. Chunked (no Content-Length): refused once over the limit.
        declared = web.post(
            f"{url}{path}", content=body(), headers={**headers(path), "Content-Length": str(200 * len(chunk))}
        )
        assert declared.status_code == 413, f"{path}: {declared.text}"
        try:
            streamed = web.post(f"{url}{path}", content=body(), headers=headers(path), timeout=60)
            assert streamed.status_code in (401, 413), f"{path}: {streamed.text}"  # Slack's: signature checked after
        except httpx.HTTPError:
            pass  # the server answered 413 and closed while the client was still sending: refused all the same
        # At most the route's own limit is ever held (32 MB for the landing's inline documents, KBs elsewhere).
        grew = _peak_rss_mb(pid) - before
        assert grew < limit_for(path) / 2**20 + 16, f"{path}: the server's peak RSS grew by {grew:.0f} MB for 200 MB"
        assert web.get(f"{url}/healthz", timeout=10).status_code == 200


def test_approval_pages_carry_security_headers(api: ApiServer) -> None:
    reply = web.get(f"{api.url}/approvals/not-a-real-token", timeout=30)
    assert reply.status_code == 403 and "text/html" in reply.headers["content-type"]
    assert reply.headers["cache-control"] == "no-store"
    assert reply.headers["referrer-policy"] == "no-referrer"
    assert reply.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in reply.headers["content-security-policy"]
    assert "default-src 'none'" in reply.headers["content-security-policy"]


def test_bad_content_length_and_malformed_bodies_are_4xx(api: ApiServer) -> None:
    raw = web.post(f"{api.url}/webhooks/landing", content=b"\xff\xfe not json", headers=JSON_HOOK, timeout=30)
    assert raw.status_code == 400
    assert web.post(f"{api.url}/webhooks/landing", content=b"[]", headers=JSON_HOOK, timeout=30).status_code == 400
    wrong_type = json.dumps({"objects": "not a list"}).encode()
    reply = web.post(f"{api.url}/webhooks/landing", content=wrong_type, headers=JSON_HOOK, timeout=30)
    assert reply.status_code == 400
