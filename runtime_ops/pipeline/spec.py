"""One retrieval pipeline's resolved settings and the names it gives its Dagster objects (pure, no Dagster).

A `PipelineSpec` is what a `defs/<name>/defs.yaml` resolves to once every field is filled in (from the file,
else from the process-wide environment default, else the built-in default). The factories of each domain
(documents, models, serving, approvals, alerts) build that pipeline's definitions from it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

from runtime_ops.policies.gate_policy import GatePolicy
from runtime_ops.tags import INGEST_TAG, LIFECYCLE_TAG, PIPELINE_TAG, STEP_TIMEOUT_TAG

# Names appear in asset keys, job/sensor names (Dagster allows [A-Za-z0-9_]), lock names and metric labels.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# Separates a pipeline's name from the object name in jobs, sensors, schedules and partitions definitions.
SEPARATOR = "__"
# The concurrency pool of every step that can move a pipeline's `production` or `retrieval_index` alias
# (`<pipeline>__lifecycle`): runs launched by automation or the UI carry no tags, but their steps' pools count.
LIFECYCLE_POOL = "lifecycle"


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name) or SEPARATOR in name:
        raise ValueError(
            f"pipeline name {name!r} must be 1-40 characters of lowercase letters, digits and single underscores, "
            "starting with a letter (it prefixes asset keys, job and sensor names)"
        )
    return name


@dataclass(frozen=True)
class LandingSpec:
    uri: str
    sqs_queue_url: str | None = None
    batch_max_objects: int = 1000
    scan_max_keys: int = 100_000
    max_document_bytes: int = 10 * 1024 * 1024
    reconcile_every_s: float | None = 3600.0  # event mode's listing sweep (None: off)

    @property
    def is_s3(self) -> bool:
        return self.uri.startswith("s3://")


@dataclass(frozen=True)
class OpenAIEmbedderSpec:
    """An OpenAI-compatible `/v1/embeddings` endpoint; endpoint + model + dimensions identify the model version."""

    endpoint: str
    model: str
    dimensions: int
    # The *name* of the environment variable holding the API key (None: no key); the value is read at run time.
    api_key_env: str | None = None
    batch_size: int = 64
    max_batch_chars: int = 100_000
    concurrency: int = 4
    timeout_s: float = 30.0
    send_dimensions: bool = False
    max_input_tokens: int = 8191  # the model's window: chunks are cut to fit it


@dataclass(frozen=True)
class SentenceTransformerSpec:
    """A sentence-transformers model from a local directory (or an installed offline model package)."""

    model: str = "all-MiniLM-L6-v2"
    batch_size: int = 64


EMBEDDER_KINDS = ("lsa", "openai", "sentence_transformers")
# Kinds whose "training" fits a model to the corpus; the others are pretrained and only re-registered.
TRAINABLE_KINDS = frozenset({"lsa"})


@dataclass(frozen=True)
class EmbedderSpec:
    kind: str = "lsa"
    # lsa: the model is fitted to (a bounded sample of) the corpus.
    dim: int = 128
    max_features: int = 50_000
    seed: int = 0
    # Most chunks the lsa model is fitted on: a deterministic sample, so training memory stays flat as the corpus
    # grows (every chunk is still embedded and evaluated).
    train_sample: int = 50_000
    openai: OpenAIEmbedderSpec | None = None
    sentence_transformers: SentenceTransformerSpec | None = None

    def __post_init__(self) -> None:
        if self.kind not in EMBEDDER_KINDS:
            raise ValueError(f"embedder kind {self.kind!r} is not one of {', '.join(EMBEDDER_KINDS)}")
        if self.kind == "openai" and self.openai is None:
            raise ValueError("embedder kind 'openai' needs its endpoint, model and dimensions (embedder.openai)")

    @property
    def trainable(self) -> bool:
        return self.kind in TRAINABLE_KINDS


@dataclass(frozen=True)
class ChunkingSpec:
    """What a pipeline declares of its chunking (None: the embedder's default; see `pipeline.chunking`)."""

    max_tokens: int | None = None
    overlap_tokens: int | None = None


@dataclass(frozen=True)
class EvaluationSpec:
    """How the evaluation question set is made: the reviewed golden set, topped up with questions generated
    from the corpus until `min_questions` of them can gate."""

    min_questions: int = 200
    # Of the generated questions, the share held out for gating (the rest may train a fine-tuned model).
    holdout_fraction: float = 0.5
    seed: int = 0
    # Have the answers endpoint's chat model write the generated questions (cached per chunk digest).
    endpoint_questions: bool = False
    # Logged queries with positive feedback (`queries: {log: text}` only) form the "production queries" set, reported
    # beside the gating set (never gating); below this many questions it is not used.
    min_production_queries: int = 20


@dataclass(frozen=True)
class ApprovalSpec:
    approvers: tuple[str, ...] = ()
    escalation_approvers: tuple[str, ...] = ()
    required_approvals: int = 1
    escalate_after: timedelta | None = timedelta(hours=4)
    expire_after: timedelta | None = timedelta(hours=24)
    slack_channel: str | None = None
    # approvals.escalation: (approvers, after) per tier, in order; replaces escalation_approvers/escalate_after.
    tiers: tuple[tuple[tuple[str, ...], timedelta], ...] = ()


@dataclass(frozen=True)
class AnswersSpec:
    questions_file: Path | None = None
    endpoint: str | None = None
    model: str = "runtime-ops-rag"
    # The *name* of the environment variable holding the endpoint's API key; the value is read at run time.
    api_key_env: str | None = None


@dataclass(frozen=True)
class RetrainSpec:
    """When the corpus sensor retrains (a condition set to None is off; see `runtime_ops.policies.retrain`)."""

    # Retrain once current chunks >= (1 + growth_fraction) x the chunks the newest model was trained on.
    growth_fraction: float | None = 0.2
    # Retrain when a batch embedded since the newest model shifts the mean embedding this far (1 - cosine).
    drift_threshold: float | None = 0.25
    # Retrain when a batch embedded since the newest model has this fraction of tokens unknown to it (lsa).
    oov_threshold: float | None = 0.3
    # A pending alert retrain request triggers a retrain (the alert sensor's retrain action too).
    on_alert: bool = True
    # Drift and OOV signals of batches with fewer chunks do not count (a few chunks' mean is noise).
    min_signal_chunks: int = 50


@dataclass(frozen=True)
class VectorStoreSpec:
    """Where a pipeline's vector indexes live: a URL without secrets, or the variable that holds the URL."""

    url: str = ""
    url_env: str | None = None

    def resolve(self) -> str:
        """The URL to open (read from its variable now, when it is given by one)."""
        if self.url_env:
            value = os.environ.get(self.url_env, "").strip()
            if not value:
                raise ValueError(f"{self.url_env} is not set: the pipeline's vector_store.url_env names it")
            return value
        return self.url


@dataclass(frozen=True)
class RetentionSpec:
    """What retention keeps besides production, the candidate and versions awaiting approval."""

    keep_previous: int = 1  # earlier production models kept as rollback targets
    keep_recent: int = 2  # newest other versions


@dataclass(frozen=True)
class BackfillSpec:
    """How a model version's embeddings are spread over a Dagster backfill: `shards` partitions of
    shadow_embeddings, run side by side within the concurrency pool `pool`, each embedding with `cores` cores."""

    shards: int = 8
    pool: str = "runtime_ops_embedding"
    cores: int = 1  # cores each partition run embeds with (its share of a worker: the pool runs several)


ROLLOUT_MODES = ("off", "shadow", "interleave", "canary")
# What keeps a caller on one arm across requests. Only `session` for now (the `session` the caller sends, else the
# request id): the field exists so a later key (an account, a tenant) is a new value, not a new section.
STICKY_KEYS = ("session",)


@dataclass(frozen=True)
class RolloutSpec:
    """How a candidate meets live traffic while it waits for a decision (`rollout:` in defs.yaml; default off).

    shadow: a sampled `share` of requests also runs on the candidate, off the response path, and only the comparison
    is kept; interleave: a `share` of requests is served a team-draft interleaving of both models' results;
    canary: a sticky `share` of sessions is served by the candidate alone. `ramp`: the shares a canary after
    approval steps through (increasing, ending at 1.0; `[]`: promote at once); `min_queries` and `max_duration` bound
    each rollout and each ramp stage, and a stage passes only when its interval rules out a loss of the
    positive-feedback rate larger than `max_loss` (absolute; `online/rollout_plan.py`).
    """

    mode: str = "off"
    share: float = 0.05
    sticky: str = "session"
    min_queries: int = 500
    max_duration: timedelta = timedelta(days=7)
    ramp: tuple[float, ...] = (0.05, 0.25, 1.0)
    max_loss: float = 0.05

    def __post_init__(self) -> None:
        if self.mode not in ROLLOUT_MODES:
            raise ValueError(f"rollout.mode {self.mode!r} is not one of {', '.join(ROLLOUT_MODES)}")
        if isinstance(self.share, bool) or not 0.0 < self.share <= 1.0:
            raise ValueError(f"rollout.share must be above 0 and at most 1 (0.05: 5% of traffic), got {self.share!r}")
        if self.sticky not in STICKY_KEYS:
            raise ValueError(f"rollout.sticky {self.sticky!r} is not supported: only {', '.join(STICKY_KEYS)} for now")
        if isinstance(self.min_queries, bool) or self.min_queries < 1:
            raise ValueError(f"rollout.min_queries must be at least 1, got {self.min_queries!r}")
        if self.max_duration <= timedelta(0):
            raise ValueError("rollout.max_duration must be a positive duration (e.g. 7d)")
        check_ramp(self.ramp)
        if isinstance(self.max_loss, bool) or not 0.0 <= self.max_loss < 1.0:
            raise ValueError(
                f"rollout.max_loss must be at least 0 and below 1 (0.05: a stage passes only when its interval rules "
                f"out a drop of more than 5 points in the positive-feedback rate), got {self.max_loss!r}"
            )

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    @property
    def ramps(self) -> bool:
        """An approved candidate ramps up before it is promoted (a rollout mode and a non-empty ramp)."""
        return self.enabled and bool(self.ramp)


def check_ramp(ramp: tuple[float, ...] | list[float]) -> None:
    """A ramp is shares in (0, 1], strictly increasing, the last one 1.0 (the whole traffic); `[]` is no ramp (an
    approved candidate is promoted at once)."""
    if not ramp:
        return
    for share in ramp:
        if isinstance(share, bool) or not 0.0 < share <= 1.0:
            raise ValueError(f"rollout.ramp: every share must be above 0 and at most 1, got {share!r}")
    if any(b <= a for a, b in pairwise(ramp)):
        raise ValueError(f"rollout.ramp must increase step by step, got {list(ramp)}")
    if ramp[-1] != 1.0:
        raise ValueError(f"rollout.ramp must end at 1.0 (the whole traffic), got {list(ramp)}")


@dataclass(frozen=True)
class QueryLogSpec:
    """What the query log keeps of a query (`text`, `hash` or `off`) and how long its records live."""

    log: str = "hash"
    retain: timedelta = timedelta(days=30)

    @property
    def keeps_text(self) -> bool:
        return self.log == "text"

    @property
    def keeps_hash(self) -> bool:
        return self.log != "off"


JOB_NAMES = ("ingest_job", "train_job", "promotion_job", "index_job", "rollback_job", "reembed_job")


@dataclass(frozen=True)
class TimeoutSpec:
    """Seconds (None: unbounded): one document's parse, and each step of a run of the named job."""

    parse_document_s: float | None = 60.0
    step_s: float | None = 1800.0  # any job not named in `steps`
    steps: dict[str, float | None] = field(default_factory=dict)

    def step_of(self, job: str) -> float | None:
        return self.steps.get(job, self.step_s)


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    landing: LandingSpec
    golden_set: Path
    alert_rules: Path
    description: str = ""
    embedder: EmbedderSpec = field(default_factory=EmbedderSpec)
    chunking: ChunkingSpec = field(default_factory=ChunkingSpec)
    gate: GatePolicy = field(default_factory=GatePolicy)
    evaluation: EvaluationSpec = field(default_factory=EvaluationSpec)
    approvals: ApprovalSpec = field(default_factory=ApprovalSpec)
    answers: AnswersSpec = field(default_factory=AnswersSpec)
    retrain: RetrainSpec = field(default_factory=RetrainSpec)
    vector_store: VectorStoreSpec = field(default_factory=VectorStoreSpec)
    retention: RetentionSpec = field(default_factory=RetentionSpec)
    backfill: BackfillSpec = field(default_factory=BackfillSpec)
    timeouts: TimeoutSpec = field(default_factory=TimeoutSpec)
    # The first wait before a failed I/O step is retried (RUNTIME_OPS_RETRY_DELAY); see retries.io_retry.
    retry_delay_s: float = 2.0
    rollout: RolloutSpec = field(default_factory=RolloutSpec)
    queries: QueryLogSpec = field(default_factory=QueryLogSpec)
    retrain_cron: str | None = "0 3 * * *"
    regression_cron: str | None = "0 */6 * * *"
    # RUNTIME_OPS_SENSOR_INTERVAL in seconds: every sensor of the pipeline ticks this often (None: their defaults).
    sensor_interval_s: int | None = None
    # Where the spec was declared (for error messages and the UI): the defs.yaml path, or "" when built in code.
    source: str = ""

    def __post_init__(self) -> None:
        check_name(self.name)

    # Names ----------------------------------------------------------------------------------------------
    def qualified(self, name: str) -> str:
        """A job, sensor, schedule or partitions definition name: `<pipeline>__<name>`."""
        return f"{self.name}{SEPARATOR}{name}"

    def asset_path(self, name: str) -> list[str]:
        """An asset key's path: `[<pipeline>, <name>]`."""
        return [self.name, name]

    def sensor_interval(self, default: int) -> int:
        """The minimum interval of one of this pipeline's sensors: the process-wide override, else `default`."""
        return self.sensor_interval_s or default

    def step_timeout_tags(self, job: str) -> dict[str, str]:
        """The run tag that bounds each step of a run of `job` (`0`: unbounded)."""
        seconds = self.timeouts.step_of(job)
        return {STEP_TIMEOUT_TAG: f"{seconds:g}" if seconds else "0"}

    def lock(self, name: str) -> str:
        return f"{self.name}:{name}"

    @property
    def tags(self) -> dict[str, str]:
        return {PIPELINE_TAG: self.name}

    @property
    def ingest_tags(self) -> dict[str, str]:
        return {PIPELINE_TAG: self.name, INGEST_TAG: self.name}

    @property
    def lifecycle_tags(self) -> dict[str, str]:
        return {PIPELINE_TAG: self.name, LIFECYCLE_TAG: self.name}

    @property
    def lifecycle_pool(self) -> str:
        """The pool of the steps that move the pipeline's aliases; the instances admit one run of it at a time."""
        return self.qualified(LIFECYCLE_POOL)


def split_qualified(name: str) -> tuple[str | None, str]:
    """`demo__train_job` -> ("demo", "train_job"); a name without a pipeline -> (None, name)."""
    head, sep, tail = name.partition(SEPARATOR)
    return (head, tail) if sep and NAME_PATTERN.match(head) else (None, name)
