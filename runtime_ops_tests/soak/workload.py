"""The soak's steady mixed workload, driven by a seed: what lands, who searches, who decides, what alerts.

Four client threads, each recording what it did and what it was answered (`Recorder`, into the History):

- **landing**: new, changed and deleted objects in the S3 bucket (their notifications reach the SQS queue the
  landing sensor reads), the same bytes put again, duplicate and stale (reordered) event messages sent straight to
  the queue, and a few files no parser accepts;
- **search**: `/api/search` at a steady rate, and feedback on a shown result for some answers (a 409 "not yet
  logged" is retried as its Retry-After says);
- **approvers**: each new approval request is approved by two approvers through two channels (a signed Slack
  click, a signed link, the CLI, the API), or rejected, or left to expire, as the seed says; a call that got no
  answer is retried as a client would (the checker then proves it was counted once); Slack redelivers some clicks;
- **alerts**: Alertmanager-shaped webhooks, some re-sent (Alertmanager repeats a firing alert), some resolved.

Every request has a client timeout (10 s), so a black-holed dependency shows up as "no answer", not a hang.
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from runtime_ops_tests.soak.deployment import APPROVERS, CHANNEL, PREFIX, Deployment
from runtime_ops_tests.soak.history import Call, Landed
from runtime_ops_tests.support.slack_signing import interaction_body, sign

__all__ = ["Recorder", "Workload"]

TIMEOUT = 10.0
BIN = Path(sys.executable).parent
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "theta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
    "vector",
    "matrix",
    "tensor",
    "queue",
    "stream",
    "batch",
    "shard",
    "replica",
    "leader",
    "follower",
    "quorum",
    "ledger",
    "journal",
    "cursor",
    "window",
    "buffer",
    "socket",
    "packet",
    "kernel",
    "thread",
    "lock",
    "fence",
    "token",
    "lease",
    "retry",
    "backoff",
    "jitter",
    "saga",
    "index",
    "corpus",
    "chunk",
    "model",
    "version",
    "alias",
    "gate",
]


@dataclass
class Recorder:
    """What the clients did, stamped in seconds since `t0` (thread-safe)."""

    t0: float = field(default_factory=time.monotonic)
    landed: list[Landed] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def land(self, landed: Landed) -> None:
        with self._lock:
            self.landed.append(landed)

    def call(self, call: Call) -> Call:
        with self._lock:
            self.calls.append(call)
        return call


@dataclass
class Keys:
    search: str
    read: str
    decide: dict[str, str]  # approver -> a key with the decide scope mapped to them


class Workload:
    def __init__(
        self,
        deployment: Deployment,
        keys: Keys,
        recorder: Recorder,
        seed: int,
        landing_gap: tuple[float, float] = (1.5, 4.0),
    ) -> None:
        self.d = deployment
        self.landing_gap = landing_gap  # seconds between landing operations (each batch is an ingest run)
        self.keys = keys
        self.rec = recorder
        self.seed = seed
        self.stop_event = threading.Event()  # everything stops
        self.traffic_stop = threading.Event()  # landing, search and alerts stop; approvers go on deciding
        self._threads: list[threading.Thread] = []
        self._http = httpx.Client(timeout=TIMEOUT)
        self._decided: set[str] = set()
        self._decisions: list[threading.Thread] = []
        self._objects: dict[str, bytes] = {}  # key (relative to the prefix) -> its current bytes
        self._serial = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        for name, loop in (
            ("landing", self._landing),
            ("search", self._search),
            ("approvers", self._approvers),
            ("alerts", self._alerts),
        ):
            rng = random.Random(f"{self.seed}:{name}")
            thread = threading.Thread(target=self._guard, args=(name, loop, rng), name=f"soak-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 60) -> None:
        """Stop starting new work; wait for what is in flight (decisions included)."""
        self.traffic_stop.set()
        self.stop_event.set()
        for thread in self._threads + self._decisions:
            thread.join(timeout)
        self._http.close()

    def _guard(self, name: str, loop: Callable[[random.Random], None], rng: random.Random) -> None:
        try:
            loop(rng)
        except Exception as exc:  # a bug in the workload itself: say so loudly, the soak's verdict says the rest
            print(f"[soak] workload thread {name} died: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            raise

    def stop_traffic(self) -> None:
        """Stop landing, searching and alerting (the faults are over); approvers go on until `stop()`, deciding what
        the last candidates ask, as people would."""
        self.traffic_stop.set()

    def _traffic_sleep(self, seconds: float) -> bool:
        """Wait; False once traffic is stopping."""
        return not self.traffic_stop.wait(seconds) and not self.stop_event.is_set()

    def _sleep(self, seconds: float) -> bool:
        """Wait; False once the workload is stopping."""
        return not self.stop_event.wait(seconds)

    def _request(
        self, what: str, method: str, url: str, channel: str = "", record: dict[str, Any] | None = None, **kwargs: Any
    ) -> tuple[Call, httpx.Response | None]:
        t, t0 = self.rec.now(), time.monotonic()
        try:
            resp: httpx.Response | None = self._http.request(method, url, **kwargs)
        except httpx.HTTPError:
            resp = None
        latency = (time.monotonic() - t0) * 1000
        outcome = ""
        if resp is not None and resp.headers.get("content-type", "").startswith("application/json"):
            with contextlib.suppress(ValueError, AttributeError):
                outcome = str(resp.json().get("outcome") or resp.json().get("status") or "")
        call = Call(
            t=t,
            what=what,
            status=None if resp is None else resp.status_code,
            latency_ms=round(latency, 1),
            channel=channel,
            record=record or {},
            outcome=outcome,
        )
        return self.rec.call(call), resp

    # ------------------------------------------------------------------ landing
    def _text(self, rng: random.Random) -> bytes:
        paragraphs = []
        for _ in range(rng.randint(2, 5)):
            sentences = [" ".join(rng.choices(WORDS, k=rng.randint(8, 16))).capitalize() + "." for _ in range(4)]
            paragraphs.append(" ".join(sentences))
        return ("# " + " ".join(rng.choices(WORDS, k=3)) + "\n\n" + "\n\n".join(paragraphs)).encode()

    def _put(self, key: str, body: bytes, corrupt: bool = False) -> str:
        etag = self.d.moto.client("s3").put_object(Bucket=self.d.bucket, Key=f"{PREFIX}/{key}", Body=body)["ETag"]
        etag = etag.strip('"')
        self._objects[key] = body
        self.rec.land(Landed(t=self.rec.now(), key=key, op="put", version=etag, corrupt=corrupt))
        return etag

    def _event(self, key: str, etag: str, size: int) -> str:
        """An S3 ObjectCreated notification as SQS carries it (what a redelivery or a late copy looks like)."""
        record = {
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": "us-east-1",
            "eventTime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "eventName": "ObjectCreated:Put",
            "s3": {"bucket": {"name": self.d.bucket}, "object": {"key": f"{PREFIX}/{key}", "size": size, "eTag": etag}},
        }
        return json.dumps({"Records": [record]})

    def _landing(self, rng: random.Random) -> None:
        s3, sqs = self.d.moto.client("s3"), self.d.moto.client("sqs")
        history: list[tuple[str, str, int]] = []  # (key, etag, size) of every put, for stale events
        while self._traffic_sleep(rng.uniform(*self.landing_gap)):
            op = rng.choices(
                ["new", "change", "delete", "same", "duplicate_event", "stale_event", "corrupt"],
                weights=[35, 20, 8, 8, 10, 7, 8],
            )[0]
            keys = sorted(self._objects)
            if op in ("change", "delete", "same", "duplicate_event") and not keys:
                op = "new"
            if op == "new":
                self._serial += 1
                key = f"soak/doc{self._serial:05d}.md"
                body = self._text(rng)
                history.append((key, self._put(key, body), len(body)))
            elif op == "change":
                key = rng.choice(keys)
                body = self._text(rng)
                history.append((key, self._put(key, body), len(body)))
            elif op == "same":  # the same bytes again: the same ETag, one ledger version
                key = rng.choice(keys)
                self._put(key, self._objects[key])
            elif op == "delete":
                key = rng.choice(keys)
                s3.delete_object(Bucket=self.d.bucket, Key=f"{PREFIX}/{key}")
                self._objects.pop(key, None)
                self.rec.land(Landed(t=self.rec.now(), key=key, op="delete"))
            elif op == "duplicate_event" and history:  # SQS delivers at least once
                key, etag, size = history[-1]
                sqs.send_message(QueueUrl=self.d.queue_url, MessageBody=self._event(key, etag, size))
            elif op == "stale_event" and history:  # an old version's event arriving after newer ones
                key, etag, size = rng.choice(history)
                sqs.send_message(QueueUrl=self.d.queue_url, MessageBody=self._event(key, etag, size))
            elif op == "corrupt":
                self._serial += 1
                kind = rng.choice(["pdf", "empty", "binary"])
                if kind == "pdf":
                    key, body = f"soak/broken{self._serial:05d}.pdf", b"%PDF-1.7\n" + rng.randbytes(600)
                elif kind == "empty":
                    key, body = f"soak/empty{self._serial:05d}.md", b""
                else:
                    key, body = f"soak/blob{self._serial:05d}.md", b"\x00\xff\xfe" + rng.randbytes(400)
                self._put(key, body, corrupt=True)

    # ------------------------------------------------------------------ search and feedback
    def _search(self, rng: random.Random) -> None:
        headers = {"Authorization": f"Bearer {self.keys.search}"}
        while self._traffic_sleep(rng.uniform(0.3, 0.8)):
            query = " ".join(rng.choices(WORDS, k=rng.randint(2, 5)))
            _, resp = self._request(
                "search", "POST", f"{self.d.ops_url}/api/search", headers=headers, json={"query": query, "k": 5}
            )
            if resp is None or resp.status_code != 200 or rng.random() > 0.3:
                continue
            body = resp.json()
            results = body.get("results") or []
            if not results:
                continue
            chunk = rng.choice(results)["chunk_id"]
            record = {
                "request_id": body["request_id"],
                "chunk_id": int(chunk),
                "signal": rng.choice(["click", "helpful"]),
            }
            for _attempt in range(4):
                call, fb = self._request(
                    "feedback", "POST", f"{self.d.ops_url}/api/feedback", headers=headers, record=record, json=record
                )
                if fb is not None and fb.status_code == 409:
                    self._sleep(float(fb.headers.get("Retry-After", "1")))
                    continue
                if call.status is None or call.status >= 500:  # no answer: the client sends it again
                    self._sleep(1.0)
                    continue
                break

    # ------------------------------------------------------------------ approvers
    def _approvers(self, rng: random.Random) -> None:
        headers = {"Authorization": f"Bearer {self.keys.read}"}
        plans: list[str] = []
        while self._sleep(2.0):
            try:
                resp = self._http.get(f"{self.d.ops_url}/api/approvals", params={"status": "pending"}, headers=headers)
            except httpx.HTTPError:
                continue
            if resp.status_code != 200:
                continue
            for request in resp.json():
                if request["id"] in self._decided or request.get("target"):
                    continue
                self._decided.add(request["id"])
                if not plans:  # a shuffled bag, as the fault plan's: every outcome comes, the first is an approval
                    plans = ["approve", "approve", "reject", "expire"]
                    rng.shuffle(plans)
                    if len(self._decided) == 1:
                        plans.remove("approve")
                        plans.append("approve")
                plan = plans.pop()
                channels = rng.sample(["slack", "link", "cli", "api"], 2)
                approvers = rng.sample(list(APPROVERS), 2)
                if plan == "expire":
                    continue
                votes = (
                    list(zip(approvers, channels, strict=True)) if plan == "approve" else [(approvers[0], channels[0])]
                )
                thread = threading.Thread(
                    target=self._decide, args=(request, plan, votes, random.Random(rng.random())), daemon=True
                )
                thread.start()
                self._decisions.append(thread)

    def _decide(self, request: dict[str, Any], plan: str, votes: list[tuple[str, str]], rng: random.Random) -> None:
        action = "approve" if plan == "approve" else "reject"
        for approver, channel in votes:
            if not self._sleep(rng.uniform(1.0, 8.0)):
                return
            for _attempt in range(5):  # a client with no answer tries again; a refusal is final
                call = {"slack": self._slack, "link": self._link, "cli": self._cli, "api": self._api}[channel](
                    request, approver, action, rng
                )
                if call is not None and call.status is not None and call.status < 500:
                    break
                if not self._sleep(2.0):
                    return

    def _slack(self, request: dict[str, Any], approver: str, action: str, rng: random.Random) -> Call | None:
        post = self._slack_message(request["id"])
        if post is None:  # not announced (yet): this approver uses the API instead
            return self._api(request, approver, action, rng)
        action_ts = f"{time.time():.6f}"
        body = interaction_body(
            request["id"],
            action,
            approver,
            message_ts=post,
            action_ts=action_ts,
            channel_id=CHANNEL,
            response_url=self.d.slack.response_url(f"soak-{action_ts}"),
        )
        record = {"request_id": request["id"], "actor": approver, "dedupe_key": f"{post}:{action_ts}:{approver}"}
        call: Call | None = None
        for _delivery in range(2 if rng.random() < 0.25 else 1):  # Slack redelivers a click it saw no answer to
            headers = {
                "content-type": "application/x-www-form-urlencoded",
                **sign(self.d.secrets["signing"], body, int(time.time())),
            }
            call, _ = self._request(
                "decision",
                "POST",
                f"{self.d.ops_url}/slack/interactions",
                channel="slack",
                record=record,
                content=body,
                headers=headers,
            )
        return call

    def _slack_message(self, request_id: str, wait: float = 20.0) -> str | None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not self.stop_event.is_set():
            for c in self.d.slack.calls_to("chat.postMessage"):
                if c.ok and request_id in json.dumps(c.payload):
                    return str(c.response_json["ts"])
            time.sleep(1.0)
        return None

    def _link(self, request: dict[str, Any], approver: str, action: str, rng: random.Random) -> Call:
        from runtime_ops.approvals import links

        token = links.issue(
            self.d.secrets["link"],
            request_id=request["id"],
            approver=approver,
            digest=request["candidate_digest"],
            expires_at=datetime.now(UTC) + timedelta(hours=1),
        )
        form = {"action": action, **({"reason": "soak: rejected by link"} if action == "reject" else {})}
        call, resp = self._vote("link", f"/approvals/{token}", request, approver, data=form)
        counted = resp is not None and resp.status_code == 200
        return self._with_outcome(call, "recorded" if counted else "refused")

    def _api(self, request: dict[str, Any], approver: str, action: str, rng: random.Random) -> Call:
        body = {"reason": "soak: rejected through the API"} if action == "reject" else {}
        headers = {"Authorization": f"Bearer {self.keys.decide[approver]}"}
        call, _ = self._vote("api", f"/api/approvals/{request['id']}/{action}", request, approver, json=body,
                             headers=headers)  # fmt: skip
        return call

    def _vote(
        self, channel: str, path: str, request: dict[str, Any], approver: str, **kwargs: Any
    ) -> tuple[Call, httpx.Response | None]:
        """POST one approver's decision on `request` to the ops API through `channel`, recorded as a decision."""
        record = {"request_id": request["id"], "actor": approver}
        return self._request("decision", "POST", f"{self.d.ops_url}{path}", channel=channel, record=record, **kwargs)

    def _cli(self, request: dict[str, Any], approver: str, action: str, rng: random.Random) -> Call:
        with tempfile.TemporaryDirectory() as folder:
            key_file = Path(folder) / "operator.key"
            key_file.write_text(self.keys.decide[approver])
            args = [
                str(BIN / "runtime-ops"),
                "approvals",
                action,
                request["id"],
                "--as",
                approver,
                "--key-file",
                str(key_file),
            ]
            if action == "reject":
                args += ["--reason", "soak: rejected from the CLI"]
            t, t0 = self.rec.now(), time.monotonic()
            try:
                done = subprocess.run(args, capture_output=True, text=True, timeout=60)
                code, err = done.returncode, done.stderr
            except subprocess.TimeoutExpired:
                code, err = None, "timed out"
        # Exit 0: counted; 1 with a one-line refusal: not counted (already decided, ...); anything else: no answer.
        status = 200 if code == 0 else 409 if code == 1 and "Traceback" not in err else None
        call = Call(
            t=t,
            what="decision",
            status=status,
            latency_ms=round((time.monotonic() - t0) * 1000, 1),
            channel="cli",
            record={"request_id": request["id"], "actor": approver},
            outcome="recorded" if code == 0 else "refused",
        )
        return self.rec.call(call)

    def _with_outcome(self, call: Call, outcome: str) -> Call:
        """`call` as recorded, with the outcome a page (not JSON) answered."""
        fixed = Call(**{**call.__dict__, "outcome": outcome})
        with self.rec._lock:
            self.rec.calls[self.rec.calls.index(call)] = fixed
        return fixed

    # ------------------------------------------------------------------ alerts
    def _alerts(self, rng: random.Random) -> None:
        headers = {"Authorization": f"Bearer {self.d.secrets['alert']}"}
        firing: list[dict[str, Any]] = []
        serial = 0
        while self._traffic_sleep(rng.uniform(8.0, 20.0)):
            if firing and rng.random() < 0.3:  # resolve one
                alert = firing.pop(rng.randrange(len(firing)))
                alert = {**alert, "status": "resolved", "endsAt": datetime.now(UTC).replace(microsecond=0).isoformat()}
            elif firing and rng.random() < 0.3:  # Alertmanager repeats a firing alert
                alert = rng.choice(firing)
            else:
                serial += 1
                starts = datetime.now(UTC).replace(microsecond=0)
                alert = {
                    "status": "firing",
                    "labels": {
                        "alertname": "SoakProbe",
                        "pipeline": "demo",
                        "severity": "info",
                        "n": str(serial),
                    },
                    "annotations": {"summary": "an alert the soak sends; no rule acts on it"},
                    "startsAt": starts.isoformat(),
                    "endsAt": "0001-01-01T00:00:00Z",
                    "generatorURL": "http://prometheus.soak/graph",
                    "fingerprint": f"soak{self.seed:x}{serial:06x}",
                }
                firing.append(alert)
            payload = {
                "version": "4",
                "groupKey": '{}:{alertname="SoakProbe"}',
                "truncatedAlerts": 0,
                "status": alert["status"],
                "receiver": "runtime-ops",
                "groupLabels": {"alertname": "SoakProbe"},
                "commonLabels": alert["labels"],
                "commonAnnotations": alert["annotations"],
                "externalURL": "http://alertmanager.soak",
                "alerts": [alert],
            }
            record = {"fingerprint": alert["fingerprint"], "starts_at": alert["startsAt"]}
            for _attempt in range(5):  # Alertmanager retries a failed notification
                call, _ = self._request(
                    "alert",
                    "POST",
                    f"{self.d.ops_url}/alerts/alertmanager",
                    record=record,
                    json=payload,
                    headers=headers,
                )
                if call.status is not None and call.status < 500:
                    break
                if not self._sleep(2.0):
                    break
