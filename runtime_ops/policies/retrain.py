"""When to retrain: on corpus growth, drift of new batches, or a pending request, not on every landing batch.

Pure: the corpus sensor gathers the facts from the store and acts on the decision.

Each condition that holds names one retrain, once: the decision's `key` (the sensor's run key) is derived from
what triggered it (the corpus revision it was seen at, the batch revision of a drift signal, the request id),
so later ticks in the same state repeat the same key and the daemon launches nothing new. A retrain resets every
condition: the newest model is then trained on the latest revision (growth is measured from its chunks, drift
signals count only from batches after its revision) and a request is consumed when its run is requested.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Trigger = Literal["first_model", "alert", "manual", "drift", "oov", "growth"]
TRIGGERS: tuple[str, ...] = ("first_model", "alert", "manual", "drift", "oov", "growth")
REQUEST_SOURCES: tuple[str, ...] = ("alert", "manual")


@dataclass(frozen=True)
class RetrainPolicy:
    """A condition set to None is off. `on_alert`: a pending alert request triggers a retrain."""

    # Retrain when current chunks >= (1 + growth_fraction) x the chunks the newest model was trained on.
    growth_fraction: float | None = 0.2
    # Retrain when a batch embedded since the newest model has 1 - cos(batch mean, corpus centroid) >= this.
    drift_threshold: float | None = 0.25
    # Retrain when a batch embedded since the newest model has this fraction of tokens unknown to the model.
    oov_threshold: float | None = 0.3
    on_alert: bool = True
    # Drift signals of smaller batches do not count: the mean of a few chunks is far from any centroid (one
    # random chunk of the demo corpus: shift ~0.75; 20: ~0.25; 50: ~0.13; 100: ~0.06), and a few documents'
    # rare words are no vocabulary drift. Corpus growth still catches a stream of small batches.
    min_signal_chunks: int = 50

    def __post_init__(self) -> None:
        if self.min_signal_chunks < 1:
            raise ValueError(f"min_signal_chunks must be at least 1, got {self.min_signal_chunks}")
        if self.growth_fraction is not None and not self.growth_fraction > 0:
            raise ValueError(f"growth_fraction must be positive (or None: off), got {self.growth_fraction}")
        if self.drift_threshold is not None and not 0 < self.drift_threshold <= 2:
            raise ValueError(f"drift_threshold must be in (0, 2] (or None: off), got {self.drift_threshold}")
        if self.oov_threshold is not None and not 0 < self.oov_threshold <= 1:
            raise ValueError(f"oov_threshold must be in (0, 1] (or None: off), got {self.oov_threshold}")


@dataclass(frozen=True)
class ModelFacts:
    """The newest registered model (not necessarily production): what it was trained on."""

    version: int
    chunks: int
    corpus_revision: int


@dataclass(frozen=True)
class DriftFacts:
    """The largest drift signals of batches (of at least `min_signal_chunks` chunks) embedded after the newest
    model's corpus revision, and the batch revision each came from (None: no signal of that kind)."""

    max_embedding_shift: float | None = None
    shift_revision: int | None = None
    max_oov_rate: float | None = None
    oov_revision: int | None = None


@dataclass(frozen=True)
class PendingRequest:
    """The oldest retrain request not yet consumed (an alert's or a person's)."""

    id: int
    source: str  # "alert" | "manual"
    corpus_revision: int
    reason: str = ""


@dataclass(frozen=True)
class RetrainFacts:
    model: ModelFacts | None
    chunks: int
    corpus_revision: int
    drift: DriftFacts = DriftFacts()
    request: PendingRequest | None = None


@dataclass(frozen=True)
class Decision:
    retrain: bool
    reason: str
    trigger: str | None = None
    key: str = ""  # the run key of the retrain ("" when not retraining)


def _key(trigger: str, revision: int) -> str:
    return f"retrain:{trigger}:rev{revision}"


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _shift(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") if value else "0"


def should_retrain(policy: RetrainPolicy, facts: RetrainFacts) -> Decision:
    """Retrain or not, why, and the run key that makes each triggering condition launch one retrain."""
    revision = facts.corpus_revision
    if revision <= 0:
        return Decision(False, "no ingested documents yet")
    model = facts.model
    if model is None:
        return Decision(
            True,
            f"no model yet: train the first one on corpus revision {revision}",
            "first_model",
            _key("first_model", revision),
        )

    unmet: list[str] = []
    request = facts.request
    if request is not None:
        if request.source == "alert" and not policy.on_alert:
            unmet.append(f"alert retrain request #{request.id} ignored (retrain.on_alert is off)")
        else:
            why = f": {request.reason}" if request.reason else ""
            return Decision(
                True,
                f"{request.source} retrain request #{request.id}{why}",
                request.source,
                f"retrain:{request.source}:req{request.id}",
            )

    if revision <= model.corpus_revision:
        return Decision(False, f"the newest model v{model.version} is trained on corpus revision {revision}")
    drift = facts.drift
    if policy.drift_threshold is not None:
        shift, at = drift.max_embedding_shift, drift.shift_revision
        if shift is not None and at is not None and at > model.corpus_revision and shift >= policy.drift_threshold:
            return Decision(
                True,
                f"embedding shift {_shift(shift)} of the batch at corpus revision {at} "
                f"(threshold {_shift(policy.drift_threshold)})",
                "drift",
                _key("drift", at),
            )
        seen = _shift(shift) if shift is not None else "none measured"
        unmet.append(f"embedding shift {seen} (threshold {_shift(policy.drift_threshold)})")

    if policy.oov_threshold is not None:
        oov, at = drift.max_oov_rate, drift.oov_revision
        if oov is not None and at is not None and at > model.corpus_revision and oov >= policy.oov_threshold:
            return Decision(
                True,
                f"OOV {_pct(oov)} of the batch at corpus revision {at} (threshold {_pct(policy.oov_threshold)})",
                "oov",
                _key("oov", at),
            )
        seen = _pct(oov) if oov is not None else "none measured"
        unmet.append(f"OOV {seen} (threshold {_pct(policy.oov_threshold)})")

    if policy.growth_fraction is not None:
        grown = (facts.chunks - model.chunks) / model.chunks if model.chunks > 0 else float("inf")
        if grown >= policy.growth_fraction:
            return Decision(
                True,
                f"corpus grew {_pct(grown)} since model v{model.version} ({model.chunks} -> {facts.chunks} chunks; "
                f"threshold {_pct(policy.growth_fraction)})",
                "growth",
                _key("growth", revision),
            )
        needs = _pct(policy.growth_fraction)
        unmet.insert(0, f"corpus grew {_pct(grown)} since model v{model.version} (needs {needs})")

    if not unmet:
        return Decision(False, f"every retrain condition is off (model v{model.version}; corpus revision {revision})")
    return Decision(False, "; ".join(unmet))
