"""One settings model for every environment variable runtime_ops reads (durations are parsed by `durations.py`,
database URLs checked by `database_urls.py`).

Unset means the embedded default (SQLite, local landing folder, local lock, no Slack); a set-but-wrong value
fails at load with a message that names the variable, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from runtime_ops.database_urls import check_sqlite_folder, normalise_database_url
from runtime_ops.durations import parse_duration
from runtime_ops.errors import UserError
from runtime_ops.policies.gate_policy import GatePolicy


class SettingsError(UserError, ValueError):
    """A setting is present but unusable; the message names the environment variable and the fix."""


def _env(name: str) -> dict:
    return {"validation_alias": AliasChoices(name)}


Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=False, frozen=True)

    home: Path = Field(default=Path(".runtime_ops"), **_env("RUNTIME_OPS_HOME"))
    database_url: str | None = Field(default=None, **_env("RUNTIME_OPS_DATABASE_URL"))
    redis_url: str | None = Field(default=None, **_env("REDIS_URL"))
    landing: str | None = Field(default=None, **_env("RUNTIME_OPS_LANDING"))
    sqs_queue_url: str | None = Field(default=None, **_env("RUNTIME_OPS_SQS_QUEUE_URL"))
    aws_endpoint_url: str | None = Field(default=None, **_env("AWS_ENDPOINT_URL"))
    slack_bot_token: SecretStr | None = Field(default=None, **_env("SLACK_BOT_TOKEN"))
    slack_signing_secret: SecretStr | None = Field(default=None, **_env("SLACK_SIGNING_SECRET"))
    slack_approval_channel: str | None = Field(default=None, **_env("SLACK_APPROVAL_CHANNEL"))
    slack_api_url: str | None = Field(default=None, **_env("SLACK_API_URL"))
    # The only origin a Slack interaction's response_url may point to (tests: a local server). The ops API POSTs to
    # that URL without a token, so a signed payload must not be able to aim it anywhere else.
    slack_hooks_url: str = Field(default="https://hooks.slack.com", **_env("SLACK_HOOKS_URL"))
    public_url: str = Field(default="http://127.0.0.1:8000", **_env("RUNTIME_OPS_PUBLIC_URL"))
    link_secret: SecretStr | None = Field(default=None, **_env("RUNTIME_OPS_LINK_SECRET"))
    # Keys the audit chain (HMAC): kept outside the database; unset, one is generated into RUNTIME_OPS_HOME.
    audit_key: SecretStr | None = Field(default=None, **_env("RUNTIME_OPS_AUDIT_KEY"))
    # Where the audit chains' heads are anchored: an append-only file, or s3://bucket/prefix (Object Lock).
    audit_anchors: str | None = Field(default=None, **_env("RUNTIME_OPS_AUDIT_ANCHORS"))
    # The CLI operator's API key (decide scope, mapped to an approver id): who `approvals approve` decides as.
    operator_key: SecretStr | None = Field(default=None, **_env("RUNTIME_OPS_OPERATOR_KEY"))
    approvers_raw: str = Field(default="", **_env("RUNTIME_OPS_APPROVERS"))
    escalation_approvers_raw: str = Field(default="", **_env("RUNTIME_OPS_ESCALATION_APPROVERS"))
    model_endpoint: str | None = Field(default=None, **_env("RUNTIME_OPS_MODEL_ENDPOINT"))
    webhook_secret: SecretStr | None = Field(default=None, **_env("RUNTIME_OPS_WEBHOOK_SECRET"))
    model_api_key: SecretStr | None = Field(default=None, **_env("RUNTIME_OPS_MODEL_API_KEY"))
    model_name: str = Field(default="runtime-ops-rag", **_env("RUNTIME_OPS_MODEL_NAME"))
    # The labelling pipelines' chat-completions endpoint (docs/inference.md); unset: the local stand-in model.
    inference_url: str | None = Field(default=None, **_env("RUNTIME_OPS_INFERENCE_URL"))
    inference_api_key: SecretStr | None = Field(default=None, **_env("RUNTIME_OPS_INFERENCE_API_KEY"))

    # Promotion policy: the gate auto-approves a candidate whose primary metric beats production by
    # `auto_approve_margin`; `meets_policy` fails one that regresses by more than `max_regression`.
    primary_metric: str = Field(default=GatePolicy.primary_metric, **_env("RUNTIME_OPS_PRIMARY_METRIC"))
    auto_approve_margin: Fraction = Field(
        default=GatePolicy.auto_approve_margin, **_env("RUNTIME_OPS_AUTO_APPROVE_MARGIN")
    )
    max_regression: Fraction = Field(default=GatePolicy.max_regression, **_env("RUNTIME_OPS_MAX_REGRESSION"))
    golden_set: Path | None = Field(default=None, **_env("RUNTIME_OPS_GOLDEN_SET"))
    max_document_bytes: int = Field(default=10 * 1024 * 1024, gt=0, **_env("RUNTIME_OPS_MAX_DOCUMENT_BYTES"))
    batch_max_objects: int = Field(default=1000, gt=0, le=25_000, **_env("RUNTIME_OPS_BATCH_MAX_OBJECTS"))
    scan_max_keys: int = Field(default=100_000, gt=0, **_env("RUNTIME_OPS_SCAN_MAX_KEYS"))
    # Event mode: how often a listing sweep reconciles what notifications missed (off: never).
    reconcile_every: timedelta | None = Field(default=timedelta(hours=1), **_env("RUNTIME_OPS_RECONCILE_EVERY"))
    # Timeouts: of one document's parse (past it: quarantined as too slow), of each step of a run (past it: the step
    # fails and its retry policy applies; a pipeline may set one per job), of a run's silence (no event while its
    # worker lives: killed, failed, retried; recovery/stalls.py), of one state-store statement (PostgreSQL).
    parse_timeout: timedelta | None = Field(default=timedelta(seconds=60), **_env("RUNTIME_OPS_PARSE_TIMEOUT"))
    step_timeout: timedelta | None = Field(default=timedelta(minutes=30), **_env("RUNTIME_OPS_STEP_TIMEOUT"))
    run_stall_timeout: timedelta | None = Field(default=timedelta(hours=1), **_env("RUNTIME_OPS_RUN_STALL_TIMEOUT"))
    statement_timeout: timedelta | None = Field(
        default=timedelta(seconds=60), **_env("RUNTIME_OPS_DB_STATEMENT_TIMEOUT")
    )
    # The first wait before a failed I/O step runs again; each later wait doubles the step (2, 6, 14, 30 s by
    # default), four retries in all. Tests that fail a step on purpose shorten it.
    retry_delay: timedelta = Field(default=timedelta(seconds=2), **_env("RUNTIME_OPS_RETRY_DELAY"))
    actor: str | None = Field(default=None, **_env("RUNTIME_OPS_ACTOR"))

    # Approval policy of new requests (a request keeps the policy it opened with).
    required_approvals: int = Field(default=1, ge=1, le=20, **_env("RUNTIME_OPS_REQUIRED_APPROVALS"))
    escalate_after: timedelta | None = Field(default=timedelta(hours=4), **_env("RUNTIME_OPS_ESCALATE_AFTER"))
    expire_after: timedelta | None = Field(default=timedelta(hours=24), **_env("RUNTIME_OPS_EXPIRE_AFTER"))
    dagster_url: str = Field(default="http://127.0.0.1:3000", **_env("RUNTIME_OPS_DAGSTER_URL"))
    # The minimum interval of every runtime_ops sensor (landing, corpus, approvals, alerts, automation), e.g. `2s`
    # in tests; unset keeps each sensor's own default (15-30 s). Dagster's daemon still ticks at most every 5 s.
    sensor_interval: timedelta | None = Field(default=None, **_env("RUNTIME_OPS_SENSOR_INTERVAL"))

    # Alerts: the remediation rule file the alert sensor reads, and the bearer token Alertmanager must send.
    alert_rules: Path | None = Field(default=None, **_env("RUNTIME_OPS_ALERT_RULES"))
    alert_token: SecretStr | None = Field(default=None, **_env("RUNTIME_OPS_ALERT_TOKEN"))
    # Without a token the alert webhook refuses every request, unless opened for local use on purpose (make dev):
    # an anonymous alert can launch retrain, re-embed and rollback runs.
    alert_open: bool = Field(default=False, **_env("RUNTIME_OPS_ALERT_OPEN"))

    # Where pipelines keep their vector indexes unless their defs.yaml says: lance:///folder or postgresql://...
    vector_store: str | None = Field(default=None, **_env("RUNTIME_OPS_VECTOR_STORE"))
    # Where the pipelines are declared (one <name>/defs.yaml each); default: the package's runtime_ops/defs.
    pipelines_dir: Path | None = Field(default=None, **_env("RUNTIME_OPS_PIPELINES_DIR"))
    # The ops API's edges. The proxies (IPs or networks, comma-separated; `*`: any) whose X-Forwarded-For and
    # X-Forwarded-Proto it believes; unset: none, a client is the socket's peer (the refusal limiter keys on it).
    forwarded_allow_ips_raw: str = Field(default="", **_env("FORWARDED_ALLOW_IPS"))
    # A request's headers must arrive within header_timeout of its first byte (or of the connection), its body
    # within body_timeout after them; a slower client is disconnected (slow-loris).
    header_timeout: timedelta | None = Field(default=timedelta(seconds=10), **_env("RUNTIME_OPS_HEADER_TIMEOUT"))
    body_timeout: timedelta | None = Field(default=timedelta(seconds=30), **_env("RUNTIME_OPS_BODY_TIMEOUT"))

    # The query log of /api/search and /api/answer: written off the request path every flush seconds (or as soon as
    # `batch` records wait); at most `queue` records wait in memory, more are dropped and counted. Feedback on a
    # request older than feedback_window is refused (410).
    query_log_flush_s: float = Field(default=1.0, gt=0.0, le=60.0, **_env("RUNTIME_OPS_QUERY_LOG_FLUSH_S"))
    query_log_batch: int = Field(default=500, ge=1, le=100_000, **_env("RUNTIME_OPS_QUERY_LOG_BATCH"))
    query_log_queue: int = Field(default=20_000, ge=1, le=1_000_000, **_env("RUNTIME_OPS_QUERY_LOG_QUEUE"))
    feedback_window: timedelta | None = Field(default=timedelta(days=7), **_env("RUNTIME_OPS_FEEDBACK_WINDOW"))
    # Searches and feedback per second per key and per session (bursts: 2x, at least 10; 0: off): request_limits.py
    key_searches_per_s: float = Field(default=50.0, ge=0.0, **_env("RUNTIME_OPS_KEY_SEARCHES_PER_S"))
    session_searches_per_s: float = Field(default=1.0, ge=0.0, **_env("RUNTIME_OPS_SESSION_SEARCHES_PER_S"))
    key_feedback_per_s: float = Field(default=50.0, ge=0.0, **_env("RUNTIME_OPS_KEY_FEEDBACK_PER_S"))
    session_feedback_per_s: float = Field(default=2.0, ge=0.0, **_env("RUNTIME_OPS_SESSION_FEEDBACK_PER_S"))

    # Observability: JSON log lines (one object per line, for collectors) or readable console lines (make dev).
    log_format: Literal["json", "console"] = Field(default="json", **_env("RUNTIME_OPS_LOG_FORMAT"))

    @field_validator("home")
    @classmethod
    def _check_home(cls, v: Path) -> Path:
        if v.expanduser().exists() and not v.expanduser().is_dir():
            raise ValueError("is a file, not a folder; name the folder that holds (or will hold) the local state")
        return v

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, v: str | None, info: ValidationInfo) -> str | None:
        if not v:
            return None
        url = normalise_database_url(v)
        check_sqlite_folder(url, info.data.get("home") or Path(".runtime_ops"))
        return url

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, v: str | None) -> str | None:
        if v and not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return v or None

    @field_validator("landing")
    @classmethod
    def _check_landing(cls, v: str | None) -> str | None:
        if not v:
            return None
        if "://" in v and not v.startswith("s3://"):
            raise ValueError("must be s3://bucket[/prefix] or a local folder path")
        if v.startswith("s3://") and not v[len("s3://") :].split("/", 1)[0]:
            raise ValueError("s3:// URL has no bucket name; use s3://bucket[/prefix]")
        return v

    @field_validator("vector_store")
    @classmethod
    def _check_vector_store(cls, v: str | None) -> str | None:
        if v and not v.startswith(("lance:///", "postgresql://", "postgres://", "postgresql+psycopg2://")):
            raise ValueError("must be lance:///absolute/folder (embedded) or postgresql://user:pw@host:5432/db")
        return v or None

    @field_validator("alert_rules", mode="before")
    @classmethod
    def _check_alert_rules(cls, v: object) -> object:
        if v is None or v == "":
            return None
        path = Path(str(v)).expanduser()
        if not path.is_file():
            raise ValueError("no such rule file (see runtime_ops/alerts/rules.example.yaml for the format)")
        return path

    @field_validator("log_format", mode="before")
    @classmethod
    def _normalise_log_format(cls, v: object) -> object:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator(
        "escalate_after",
        "expire_after",
        "sensor_interval",
        "reconcile_every",
        "parse_timeout",
        "step_timeout",
        "run_stall_timeout",
        "statement_timeout",
        "retry_delay",
        "header_timeout",
        "body_timeout",
        "feedback_window",
        mode="before",
    )
    @classmethod
    def _parse_duration(cls, v: object) -> object:
        return parse_duration(v) if isinstance(v, str) else v

    @field_validator(
        "aws_endpoint_url",
        "slack_api_url",
        "public_url",
        "model_endpoint",
        "inference_url",
        "sqs_queue_url",
        "dagster_url",
    )
    @classmethod
    def _check_http_url(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return v.rstrip("/") if v.count("/") > 2 else v

    @field_validator("slack_hooks_url")
    @classmethod
    def _check_hooks_url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") or parts.query:
            raise ValueError("must be an origin such as https://hooks.slack.com (scheme and host, no path)")
        return f"{parts.scheme}://{parts.netloc}"

    @field_validator("forwarded_allow_ips_raw")
    @classmethod
    def _check_forwarded_allow_ips(cls, v: str) -> str:
        for item in (x.strip() for x in v.split(",")):
            if item and item != "*":
                try:
                    ipaddress.ip_network(item, strict=False)
                except ValueError:
                    raise ValueError(
                        f"{item!r} is not an IP address or network; list the proxies, e.g. 10.0.0.0/8,127.0.0.1"
                    ) from None
        return v

    @model_validator(mode="after")
    def _check_approvals(self) -> Settings:
        allowed = len(set(self.approvers) | set(self.escalation_approvers))
        if allowed and self.required_approvals > allowed:
            raise ValueError(
                f"RUNTIME_OPS_REQUIRED_APPROVALS={self.required_approvals} but only {allowed} approver"
                f"{'s are' if allowed > 1 else ' is'} listed in RUNTIME_OPS_APPROVERS / "
                "RUNTIME_OPS_ESCALATION_APPROVERS; list more approvers or require fewer approvals"
            )
        if self.escalate_after and self.expire_after and self.escalate_after >= self.expire_after:
            raise ValueError("RUNTIME_OPS_ESCALATE_AFTER must be shorter than RUNTIME_OPS_EXPIRE_AFTER")
        return self

    @model_validator(mode="after")
    def _check_slack_pair(self) -> Settings:
        if self.slack_bot_token and not self.slack_approval_channel:
            raise ValueError("SLACK_BOT_TOKEN is set but SLACK_APPROVAL_CHANNEL is not; set the channel id to post to")
        return self

    # Derived values -------------------------------------------------------------------------------
    @property
    def resolved_home(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.resolved_home / 'state.db'}"

    @property
    def resolved_landing(self) -> str:
        return self.landing or str(self.resolved_home / "landing")

    def sensor_seconds(self, default: int) -> int:
        """A sensor's minimum interval: RUNTIME_OPS_SENSOR_INTERVAL when set (at least 1 s), else `default`."""
        return max(1, round(self.sensor_interval.total_seconds())) if self.sensor_interval else default

    @property
    def gate_defaults(self) -> dict[str, str | float]:
        """The process-wide defaults of a pipeline's `gate:` section, by `GatePolicy` field."""
        return {
            "primary_metric": self.primary_metric,
            "auto_approve_margin": self.auto_approve_margin,
            "max_regression": self.max_regression,
        }

    @property
    def approvers(self) -> tuple[str, ...]:
        return tuple(x.strip() for x in self.approvers_raw.split(",") if x.strip())

    @property
    def forwarded_allow_ips(self) -> tuple[str, ...]:
        return tuple(x.strip() for x in self.forwarded_allow_ips_raw.split(",") if x.strip())

    @property
    def escalation_approvers(self) -> tuple[str, ...]:
        return tuple(x.strip() for x in self.escalation_approvers_raw.split(",") if x.strip())

    @property
    def resolved_alert_rules(self) -> Path:
        return self.alert_rules or Path(__file__).parent / "alerts" / "rules.example.yaml"

    @property
    def resolved_golden_set(self) -> Path:
        return self.golden_set or Path(__file__).parent / "demo" / "golden.jsonl"

    def resolved_link_secret(self) -> str:
        """The link-signing secret; embedded mode keeps a generated one under RUNTIME_OPS_HOME."""
        return self.link_secret.get_secret_value() if self.link_secret else self._home_secret("link_secret")

    def resolved_audit_key(self, *, create: bool = False) -> str:
        """The audit chain's key: RUNTIME_OPS_AUDIT_KEY, else the key file under RUNTIME_OPS_HOME (every process
        that writes the audit log must use the same one: set RUNTIME_OPS_AUDIT_KEY where they do not share a home).
        Only creating a store makes that file (`create`); without it everything else refuses, since a new key
        would neither verify the log nor chain onto it."""
        if self.audit_key:
            return self.audit_key.get_secret_value()
        path = self.resolved_home / "audit_key"
        if create:
            return self._home_secret("audit_key")
        try:
            key = path.read_text().strip()
        except FileNotFoundError:
            key = ""
        except OSError as exc:
            raise SettingsError(f"cannot read the audit key {path}: {exc.strerror}") from exc
        if not key:
            raise SettingsError(
                f"no audit key: RUNTIME_OPS_AUDIT_KEY is unset and {path} is missing or empty; set "
                "RUNTIME_OPS_AUDIT_KEY (or restore that file) to the key the audit log was written with"
            )
        return key

    @property
    def resolved_audit_anchors(self) -> str:
        return self.audit_anchors or str(self.resolved_home / "audit_anchors.jsonl")

    def _home_secret(self, name: str) -> str:
        path = self.resolved_home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            with contextlib.suppress(FileExistsError):  # another process made it first: read theirs
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(secrets.token_urlsafe(32))
        return path.read_text().strip()


def _alias_of(field_name: str) -> str:
    alias = Settings.model_fields[field_name].validation_alias
    return alias.choices[0] if isinstance(alias, AliasChoices) else field_name  # type: ignore[union-attr]


def _shown(name: str) -> str:
    """The value variable `name` was given, for its error message: never a secret, nor a URL with credentials."""
    fields = {_alias_of(f): f for f in Settings.model_fields}
    given = os.environ.get(name)
    secret = name in fields and "SecretStr" in str(Settings.model_fields[fields[name]].annotation)
    if given is None or secret or "@" in given:
        return ""
    return f" (got {given!r})"


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment, turning validation errors into one line that names the variables."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = err.get("loc") or ()
            # A field's error is located at its variable's name; a check across settings names them itself.
            name = _alias_of(str(loc[0])) if loc and loc[0] in Settings.model_fields else str(loc[0]) if loc else ""
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"{name}{_shown(name)}: {message}" if name else message)
        raise SettingsError("; ".join(problems)) from None


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
