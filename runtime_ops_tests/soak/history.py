"""What a soak saw, as data: the faults it injected, what its clients sent and were answered, and the state the
deployment ended in. Saved as one JSON file (`History.save`), so a run can be checked again (`make soak-check`)
and a failing one replayed from its seed.

Pure data and JSON: no servers, no Dagster. Times are seconds since the soak started (`t`), from one monotonic
clock in the soak's process.

    Fault      one injected fault: its kind, what it hit, when it began and ended, when the deployment answered
               again (`recovered`), and the seed it was drawn from
    Landed     one change the workload made at the landing: a put of an object version (its ETag), a delete
    Call       one request a client made and what it was answered (`status` None: no answer at all); `record`
               names what the call wrote (feedback, a vote, an alert) so the checker can find it
    Final      the deployment's state after recovery, read from the state store, Dagster and the audit log
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Call", "Fault", "Final", "History", "Landed"]


@dataclass(frozen=True)
class Fault:
    id: int
    kind: str  # e.g. "kill_daemon", "postgres_restart", "redis_down", "pg_proxy_reset"
    target: str  # the process or connection it hit ("daemon", "postgres", "redis via proxy", "run 4f2a…")
    start: float
    end: float  # the fault was lifted: the process restarted, the server back, the proxy passing again
    recovered: float | None  # the deployment answered its health probes again (None: it never did)
    seed: int
    detail: str = ""

    def window(self, grace: float) -> tuple[float, float]:
        """The interval errors may be blamed on this fault: its start to its recovery (else its end), plus `grace`
        for the clients' in-flight requests and retries."""
        return self.start, max(self.end, self.recovered or self.end) + grace


@dataclass(frozen=True)
class Landed:
    t: float
    key: str
    op: str  # "put" | "delete"
    version: str | None = None  # the put's ETag, without quotes (the ledger's version); None for a delete
    corrupt: bool = False  # bytes no parser accepts: it must end quarantined with a reason


@dataclass(frozen=True)
class Call:
    t: float
    what: str  # "search" | "answer" | "feedback" | "decision" | "alert"
    status: int | None  # HTTP status; None when no answer came (reset, timeout, refused connection)
    latency_ms: float
    channel: str = ""  # decisions: "slack" | "link" | "cli" | "api"
    record: dict[str, Any] = field(default_factory=dict)  # the ids of what the call wrote
    outcome: str = ""  # what the answer said was done ("recorded", "accepted", "already_decided", ...)

    @property
    def acknowledged(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass
class Final:
    documents: list[dict[str, Any]] = field(default_factory=list)  # key, version, status, reason
    # id, candidate_version, candidate_digest (approved), live_digest (of the model and report now registered), ...
    requests: list[dict[str, Any]] = field(default_factory=list)
    votes: list[dict[str, Any]] = field(default_factory=list)  # request_id, actor, vote, channel
    deliveries: list[dict[str, Any]] = field(default_factory=list)  # Slack clicks: dedupe_key, request_id, outcome
    production_changes: list[dict[str, Any]] = field(default_factory=list)  # alias_history rows of `production`
    production: int | None = None
    serving_version: int | None = None  # model version of the index `retrieval_index` points at
    audit_production: int | None = None  # the version the newest promotion record in the audit log names
    audit_verified: bool = False
    audit_detail: str = ""
    feedback: list[dict[str, Any]] = field(default_factory=list)  # request_id, chunk_id, signal
    alerts: list[dict[str, Any]] = field(default_factory=list)  # fingerprint, starts_at, status
    unfinished_runs: list[dict[str, Any]] = field(default_factory=list)  # run_id, job, status


@dataclass
class History:
    seed: int
    minutes: float
    faults: list[Fault] = field(default_factory=list)
    landed: list[Landed] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    final: Final = field(default_factory=Final)
    # Planned faults that found nothing to hit (t, kind, why), and counts that explain a verdict (runs by job and
    # status, landing batches by status, the batches not ingested and their runs).
    skipped: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    grace: float = 15.0  # seconds after a fault's recovery an error may still be blamed on it

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1, sort_keys=True))

    @classmethod
    def load(cls, path: Path) -> History:
        return cls.from_dict(json.loads(path.read_text()))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> History:
        return cls(
            seed=int(data["seed"]),
            minutes=float(data["minutes"]),
            faults=[Fault(**f) for f in data.get("faults", [])],
            landed=[Landed(**x) for x in data.get("landed", [])],
            calls=[Call(**c) for c in data.get("calls", [])],
            final=Final(**data.get("final", {})),
            skipped=list(data.get("skipped", [])),
            diagnostics=dict(data.get("diagnostics", {})),
            grace=float(data.get("grace", 15.0)),
        )
