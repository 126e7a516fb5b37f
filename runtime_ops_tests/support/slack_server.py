"""A small local Slack Web API for tests: the real slack_sdk `WebClient` talks to it over HTTP.

    with SlackServer(token="xoxb-test") as slack:
        client = WebClient("xoxb-test", base_url=slack.base_url)
        client.chat_postMessage(channel="C0APPROVALS", text="hi")
        assert slack.calls[-1].method == "chat.postMessage"

It answers `auth.test`, `chat.postMessage`, `chat.update` and `chat.postEphemeral` the way Slack does (JSON or
form bodies, `Authorization: Bearer` or a `token` field, `{"ok": false, "error": ...}` on failure, increasing
`ts` strings), keeps every message and every call, serves `response_url` endpoints
(`/response/<name>`), checks Block Kit limits (`invalid_blocks`, like Slack), and can inject faults
(`fail_next`). All state is guarded by one lock; the server runs in a daemon thread on 127.0.0.1, port 0.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

HOST = "127.0.0.1"
TS_BASE = 1_700_000_000
BOT_USER_ID = "U0BOTUSER"
BOT_ID = "B0BOT"
TEAM_ID = "T0TEST"


@dataclass(frozen=True)
class Call:
    """One request the server received, in arrival order (including rejected ones)."""

    method: str  # "chat.update", ... or "response_url:<name>"
    payload: dict[str, Any]
    status: int = 200
    response: dict[str, Any] | str = field(default_factory=dict)
    token: str | None = None  # the token presented, if any

    @property
    def response_json(self) -> dict[str, Any]:
        """The response, for a call answered with JSON (every Web API method)."""
        assert isinstance(self.response, dict), self.response
        return self.response

    @property
    def ok(self) -> bool:
        if isinstance(self.response, dict):
            return bool(self.response.get("ok"))
        return self.response == "ok"


@dataclass
class _Fault:
    status: int | None
    error: str | None
    retry_after: float | None
    delay: float
    body: str | None


# ---------------------------------------------------------------------------------------------- block limits


def block_limit_violations(blocks: Any) -> list[str]:
    """Where `blocks` break Slack's Block Kit limits (empty list: Slack would accept them)."""
    problems: list[str] = []
    if not isinstance(blocks, list):
        return ["blocks is not a list"]
    if len(blocks) > 50:
        problems.append(f"{len(blocks)} blocks > 50")

    def text_len(obj: Any, where: str, limit: int) -> None:
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            problems.append(f"{where}: missing text object")
            return
        if obj.get("type") not in {"plain_text", "mrkdwn"}:
            problems.append(f"{where}: bad text type {obj.get('type')!r}")
        if not obj["text"]:
            problems.append(f"{where}: empty text")
        if len(obj["text"]) > limit:
            problems.append(f"{where}: text {len(obj['text'])} > {limit}")

    seen_block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        where = f"blocks[{i}]"
        if not isinstance(block, dict):
            problems.append(f"{where}: not an object")
            continue
        block_id = block.get("block_id")
        if block_id is not None:
            if not isinstance(block_id, str) or len(block_id) > 255:
                problems.append(f"{where}: block_id longer than 255")
            elif block_id in seen_block_ids:
                problems.append(f"{where}: duplicate block_id {block_id!r}")
            else:
                seen_block_ids.add(block_id)
        kind = block.get("type")
        if kind == "header":
            text_len(block.get("text"), f"{where}.text", 150)
            if isinstance(block.get("text"), dict) and block["text"].get("type") != "plain_text":
                problems.append(f"{where}: header text must be plain_text")
        elif kind == "section":
            if "text" not in block and "fields" not in block:
                problems.append(f"{where}: section needs text or fields")
            if "text" in block:
                text_len(block["text"], f"{where}.text", 3000)
            fields = block.get("fields") or []
            if len(fields) > 10:
                problems.append(f"{where}: {len(fields)} fields > 10")
            for j, fld in enumerate(fields):
                text_len(fld, f"{where}.fields[{j}]", 2000)
        elif kind == "context":
            elements = block.get("elements") or []
            if not elements or len(elements) > 10:
                problems.append(f"{where}: context needs 1..10 elements, has {len(elements)}")
            for j, el in enumerate(elements):
                text_len(el, f"{where}.elements[{j}]", 3000)
        elif kind == "actions":
            elements = block.get("elements") or []
            if not elements or len(elements) > 25:
                problems.append(f"{where}: actions needs 1..25 elements, has {len(elements)}")
            action_ids: set[str] = set()
            for j, el in enumerate(elements):
                ew = f"{where}.elements[{j}]"
                if el.get("type") != "button":
                    continue
                text_len(el.get("text"), f"{ew}.text", 75)
                aid = el.get("action_id")
                if aid is not None:
                    if not isinstance(aid, str) or len(aid) > 255:
                        problems.append(f"{ew}: action_id longer than 255")
                    elif aid in action_ids:
                        problems.append(f"{ew}: duplicate action_id {aid!r}")
                    action_ids.add(str(aid))
                value = el.get("value")
                if value is not None and (not isinstance(value, str) or len(value) > 2000):
                    problems.append(f"{ew}: value longer than 2000")
                if el.get("style") not in {None, "primary", "danger"}:
                    problems.append(f"{ew}: bad style {el.get('style')!r}")
                confirm = el.get("confirm")
                if confirm is not None:
                    text_len(confirm.get("title"), f"{ew}.confirm.title", 100)
                    text_len(confirm.get("text"), f"{ew}.confirm.text", 300)
                    text_len(confirm.get("confirm"), f"{ew}.confirm.confirm", 30)
                    text_len(confirm.get("deny"), f"{ew}.confirm.deny", 30)
        elif kind in {"divider", "image", "input", "rich_text", "file", "video", "markdown"}:
            pass
        else:
            problems.append(f"{where}: unknown block type {kind!r}")
    return problems


# ---------------------------------------------------------------------------------------------- server


class SlackServer:
    """A local Slack Web API + `response_url` receiver. Use as a context manager or `.start()` / `.stop()`."""

    def __init__(self, token: str = "xoxb-test-token", *, channels: set[str] | None = None) -> None:
        self.token = token
        self.channels = channels  # None: any channel id is accepted
        self._lock = threading.Condition()
        self._calls: list[Call] = []
        self._messages: dict[str, dict[str, Any]] = {}
        self._ephemerals: list[dict[str, Any]] = []
        self._responses: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._faults: dict[str, deque[_Fault]] = defaultdict(deque)
        self._ts_counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> SlackServer:
        if self._httpd is not None:
            return self
        httpd = ThreadingHTTPServer((HOST, 0), _Handler)
        httpd.daemon_threads = True
        httpd.slack = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="slack-test-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> SlackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("SlackServer is not started")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    @property
    def base_url(self) -> str:
        """What `WebClient(base_url=...)` / `SLACK_API_URL` should be."""
        return f"{self.url}api/"

    def response_url(self, name: str) -> str:
        return f"{self.url}response/{name}"

    # -- state (snapshots, safe to read from any thread)

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    @property
    def messages(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._messages)

    @property
    def ephemerals(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._ephemerals)

    @property
    def responses(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return {name: copy.deepcopy(items) for name, items in self._responses.items()}

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def thread_replies(self, ts: str) -> list[dict[str, Any]]:
        return [m for m in self.messages.values() if m.get("thread_ts") == ts]

    def wait_for(self, predicate: Callable[[SlackServer], bool], timeout: float = 5.0) -> None:
        """Block until `predicate(self)` holds (state changes wake it up); AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                if predicate(self):
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"Slack test server: condition not met within {timeout}s")
                self._lock.wait(remaining)

    def wait_for_calls(self, method: str, count: int = 1, timeout: float = 5.0) -> list[Call]:
        self.wait_for(lambda s: len(s.calls_to(method)) >= count, timeout)
        return self.calls_to(method)

    def fail_next(
        self,
        method: str,
        *,
        status: int | None = None,
        error: str | None = None,
        retry_after: float | None = None,
        delay: float = 0.0,
        body: str | None = None,
        times: int = 1,
    ) -> None:
        """Make the next `times` calls to `method` fail (before auth is checked).

        `error="ratelimited"` answers HTTP 429 with `Retry-After` (default 1); another `error` answers
        `{"ok": false, "error": ...}` (HTTP 200 unless `status`); `status` alone answers that status with
        `{"ok": false, "error": "internal_error"}` (or `body` verbatim). `delay` sleeps before answering
        (timeouts); with no status/error the call then proceeds normally. For `response_url`s use
        `method="response_url"`.
        """
        with self._lock:
            for _ in range(times):
                self._faults[method].append(_Fault(status, error, retry_after, delay, body))

    def reset(self) -> None:
        with self._lock:
            self._calls.clear()
            self._messages.clear()
            self._ephemerals.clear()
            self._responses.clear()
            self._faults.clear()

    # -- request handling (called from handler threads)

    def _take_fault(self, method: str) -> _Fault | None:
        with self._lock:
            queue = self._faults.get(method)
            return queue.popleft() if queue else None

    def _record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)
            self._lock.notify_all()

    def _next_ts(self) -> str:
        self._ts_counter += 1
        micros = self._ts_counter * 100
        return f"{TS_BASE + micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _handle_api(self, method: str, payload: dict[str, Any], token: str | None) -> tuple[int, dict[str, Any]]:
        if not token:
            return 200, {"ok": False, "error": "not_authed"}
        if token != self.token:
            return 200, {"ok": False, "error": "invalid_auth"}
        handler = _API.get(method)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method", "req_method": method}
        with self._lock:
            return 200, handler(self, payload)

    def _handle_response(self, name: str, payload: dict[str, Any]) -> None:
        with self._lock:
            self._responses[name].append(payload)

    # -- Web API methods (called with the lock held)

    def _check_channel(self, payload: dict[str, Any]) -> str | None:
        channel = payload.get("channel")
        if not channel or (self.channels is not None and channel not in self.channels):
            return None
        return str(channel)

    def _check_content(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        text, blocks = payload.get("text"), payload.get("blocks")
        if not text and not blocks:
            return {"ok": False, "error": "no_text"}
        if isinstance(text, str) and len(text) > 40_000:
            return {"ok": False, "error": "msg_too_long"}
        if blocks is not None:
            problems = block_limit_violations(blocks)
            if problems:
                return {"ok": False, "error": "invalid_blocks", "errors": problems[:20]}
        return None

    def _auth_test(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://runtime-ops-test.slack.com/",
            "team": "runtime-ops test",
            "user": "runtime-ops",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _post_message(self, payload: dict[str, Any]) -> dict[str, Any]:
        channel = self._check_channel(payload)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        problem = self._check_content(payload)
        if problem:
            return problem
        thread_ts = payload.get("thread_ts") or None
        if thread_ts is not None:
            parent = self._messages.get(str(thread_ts))
            if parent is None or parent["channel"] != channel:
                return {"ok": False, "error": "thread_not_found"}
        ts = self._next_ts()
        message = {
            "type": "message",
            "channel": channel,
            "ts": ts,
            "text": payload.get("text") or "",
            "blocks": payload.get("blocks") or [],
            "thread_ts": str(thread_ts) if thread_ts else None,
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "edits": 0,
        }
        self._messages[ts] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": _public(message)}

    def _update(self, payload: dict[str, Any]) -> dict[str, Any]:
        channel = self._check_channel(payload)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        ts = str(payload.get("ts") or "")
        message = self._messages.get(ts)
        if message is None or message["channel"] != channel:
            return {"ok": False, "error": "message_not_found"}
        problem = self._check_content(payload)
        if problem:
            return problem
        if "text" in payload:
            message["text"] = payload.get("text") or ""
        if "blocks" in payload:
            message["blocks"] = payload.get("blocks") or []
        message["edits"] += 1
        return {"ok": True, "channel": channel, "ts": ts, "text": message["text"], "message": _public(message)}

    def _post_ephemeral(self, payload: dict[str, Any]) -> dict[str, Any]:
        channel = self._check_channel(payload)
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        if not payload.get("user"):
            return {"ok": False, "error": "user_not_found"}
        problem = self._check_content(payload)
        if problem:
            return problem
        ts = self._next_ts()
        self._ephemerals.append(
            {
                "channel": channel,
                "user": payload["user"],
                "ts": ts,
                "text": payload.get("text") or "",
                "blocks": payload.get("blocks") or [],
                "thread_ts": payload.get("thread_ts"),
            }
        )
        return {"ok": True, "message_ts": ts}


def _public(message: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k not in {"channel", "edits"} and v is not None}
    return copy.deepcopy(out)


_API: dict[str, Callable[[SlackServer, dict[str, Any]], dict[str, Any]]] = {
    "auth.test": SlackServer._auth_test,
    "chat.postMessage": SlackServer._post_message,
    "chat.update": SlackServer._update,
    "chat.postEphemeral": SlackServer._post_ephemeral,
}


def _decode_json_fields(payload: dict[str, Any]) -> dict[str, Any]:
    """Form bodies carry `blocks`/`attachments`/`metadata` as JSON strings; Slack decodes them."""
    for key in ("blocks", "attachments", "metadata"):
        value = payload.get(key)
        if isinstance(value, str):
            try:
                payload[key] = json.loads(value)
            except ValueError:
                payload[key] = value
    return payload


class _Handler(BaseHTTPRequestHandler):
    server_version = "SlackTestServer/1.0"
    protocol_version = "HTTP/1.1"

    @property
    def slack(self) -> SlackServer:
        return self.server.slack  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    # -- plumbing

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, body: dict[str, Any] | str, headers: dict[str, str] | None = None) -> None:
        if isinstance(body, dict):
            raw = json.dumps(body).encode("utf-8")
            content_type = "application/json; charset=utf-8"
        else:
            raw = body.encode("utf-8")
            content_type = "text/html; charset=utf-8"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(raw)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(raw)

    def _parse_payload(self, body: bytes, query: str) -> dict[str, Any] | None:
        payload: dict[str, Any] = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if not body:
            return payload
        if content_type == "application/json":
            try:
                data = json.loads(body.decode("utf-8"))
            except ValueError:
                return None
            if not isinstance(data, dict):
                return None
            payload.update(data)
        elif content_type in {"application/x-www-form-urlencoded", ""}:
            form = parse_qs(body.decode("utf-8"), keep_blank_values=True)
            payload.update({k: v[-1] for k, v in form.items()})
            _decode_json_fields(payload)
        else:
            return None
        return payload

    def _apply_fault(self, fault: _Fault | None) -> bool:
        """Sleep/answer per the fault; True when the response was sent (the call is over)."""
        if fault is None:
            return False
        if fault.delay:
            time.sleep(fault.delay)
        if fault.status is None and fault.error is None:
            return False
        headers: dict[str, str] = {}
        if fault.error == "ratelimited":
            status = fault.status or 429
            headers["Retry-After"] = f"{fault.retry_after if fault.retry_after is not None else 1:g}"
        else:
            status = fault.status or 200
            if fault.retry_after is not None:
                headers["Retry-After"] = f"{fault.retry_after:g}"
        body: dict[str, Any] | str = (
            fault.body if fault.body is not None else {"ok": False, "error": fault.error or "internal_error"}
        )
        with contextlib.suppress(OSError):  # the client gave up (timeout) while we slept
            self._send(status, body, headers)
        return True

    def _dispatch(self) -> None:
        parts = urlsplit(self.path)
        body = self._read_body()
        path = unquote(parts.path)
        if path.startswith("/api/"):
            self._api(path[len("/api/") :], body, parts.query)
        elif path.startswith("/response/") and self.command == "POST":
            self._response(path[len("/response/") :], body)
        else:
            self._send(404, {"ok": False, "error": "not_found"})

    def _api(self, method: str, body: bytes, query: str) -> None:
        slack = self.slack
        payload = self._parse_payload(body, query)
        auth = self.headers.get("Authorization") or ""
        token = auth[len("Bearer ") :].strip() if auth.startswith("Bearer ") else None
        if payload is not None and not token and isinstance(payload.get("token"), str):
            token = payload.pop("token")
        elif payload is not None:
            payload.pop("token", None)
        fault = slack._take_fault(method)
        if fault is not None and self._apply_fault(fault):
            slack._record(Call(method, payload or {}, fault.status or 200, {"fault": True}, token))
            return
        if payload is None:
            status, response = 200, {"ok": False, "error": "invalid_form_data"}
        else:
            status, response = slack._handle_api(method, payload, token)
        slack._record(Call(method, payload or {}, status, response, token))
        with contextlib.suppress(OSError):  # the client gave up (timeout)
            self._send(status, response)

    def _response(self, name: str, body: bytes) -> None:
        slack = self.slack
        method = "response_url"
        try:
            payload = json.loads(body.decode("utf-8")) if body else None
        except ValueError:
            payload = None
        fault = slack._take_fault(method)
        if fault is not None and self._apply_fault(fault):
            slack._record(Call(f"response_url:{name}", payload or {}, fault.status or 200, {"fault": True}))
            return
        if not isinstance(payload, dict) or not (payload.get("text") or payload.get("blocks")):
            slack._record(Call(f"response_url:{name}", payload or {}, 400, "invalid_payload"))
            self._send(400, "invalid_payload")
            return
        problems = block_limit_violations(payload["blocks"]) if "blocks" in payload else []
        if problems:
            slack._record(Call(f"response_url:{name}", payload, 400, "invalid_blocks"))
            self._send(400, "invalid_blocks")
            return
        slack._handle_response(name, payload)
        slack._record(Call(f"response_url:{name}", payload, 200, "ok"))
        self._send(200, "ok")
