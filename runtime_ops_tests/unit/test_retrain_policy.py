"""The retrain policy (pure): each condition triggers one retrain with a stable key and resets after it; the
drift signals; the `retrain:` section of a defs.yaml."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from runtime_ops.components.loading import PipelineConfigError, check_folder
from runtime_ops.pipeline.attributes import PipelineAttributes
from runtime_ops.pipeline.resolve import resolve_spec
from runtime_ops.pipeline.spec import RetrainSpec
from runtime_ops.policies.drift import BatchDrift, Centroid, embedding_shift, oov_rate
from runtime_ops.policies.retrain import (
    DriftFacts,
    ModelFacts,
    PendingRequest,
    RetrainFacts,
    RetrainPolicy,
    should_retrain,
)
from runtime_ops.settings import load_settings

POLICY = RetrainPolicy(growth_fraction=0.2, drift_threshold=0.25, oov_threshold=0.3)
V3 = ModelFacts(version=3, chunks=1000, corpus_revision=7)


def facts(chunks: int = 1048, revision: int = 8, **kw: object) -> RetrainFacts:
    return RetrainFacts(model=kw.pop("model", V3), chunks=chunks, corpus_revision=revision, **kw)  # type: ignore[arg-type]


def test_first_model_is_trained_on_the_first_ingested_revision() -> None:
    assert not should_retrain(POLICY, RetrainFacts(model=None, chunks=0, corpus_revision=0)).retrain
    d = should_retrain(POLICY, RetrainFacts(model=None, chunks=40, corpus_revision=1))
    assert (d.retrain, d.trigger, d.key) == (True, "first_model", "retrain:first_model:rev1")


def test_below_every_threshold_the_reason_names_each_unmet_condition() -> None:
    drift = DriftFacts(max_embedding_shift=0.03, shift_revision=8, max_oov_rate=0.021, oov_revision=8)
    d = should_retrain(POLICY, facts(drift=drift))
    assert not d.retrain and d.trigger is None and d.key == ""
    assert d.reason == (
        "corpus grew 4.8% since model v3 (needs 20.0%); embedding shift 0.03 (threshold 0.25); "
        "OOV 2.1% (threshold 30.0%)"
    )
    quiet = should_retrain(POLICY, facts())
    assert "embedding shift none measured" in quiet.reason and "OOV none measured" in quiet.reason


def test_growth_triggers_once_per_revision_and_resets_after_the_retrain() -> None:
    d = should_retrain(POLICY, facts(chunks=1200, revision=9))
    assert (d.retrain, d.trigger, d.key) == (True, "growth", "retrain:growth:rev9")
    assert "corpus grew 20.0% since model v3" in d.reason
    assert should_retrain(POLICY, facts(chunks=1200, revision=9)).key == d.key  # same state, same run key
    retrained = ModelFacts(version=4, chunks=1200, corpus_revision=9)
    after = should_retrain(POLICY, facts(chunks=1200, revision=9, model=retrained))
    assert not after.retrain and after.reason == "the newest model v4 is trained on corpus revision 9"
    assert not should_retrain(POLICY, facts(chunks=1300, revision=10, model=retrained)).retrain  # 8.3%


def test_drift_and_oov_trigger_once_per_batch_revision() -> None:
    shifted = DriftFacts(max_embedding_shift=0.4, shift_revision=8, max_oov_rate=0.5, oov_revision=8)
    d = should_retrain(POLICY, facts(drift=shifted))
    assert (d.trigger, d.key) == ("drift", "retrain:drift:rev8")
    assert d.reason == "embedding shift 0.4 of the batch at corpus revision 8 (threshold 0.25)"
    oov = should_retrain(POLICY, facts(drift=DriftFacts(max_oov_rate=0.5, oov_revision=8)))
    assert (oov.trigger, oov.key) == ("oov", "retrain:oov:rev8") and "OOV 50.0%" in oov.reason
    # A signal from a batch the newest model already trained on does not count.
    old = DriftFacts(max_embedding_shift=0.9, shift_revision=7)
    assert not should_retrain(POLICY, facts(drift=old)).retrain
    # Conditions set to None are off and not listed.
    off = RetrainPolicy(growth_fraction=None, drift_threshold=None, oov_threshold=None)
    d = should_retrain(off, facts(chunks=5000, drift=shifted))
    assert not d.retrain and d.reason.startswith("every retrain condition is off")


def test_a_pending_request_triggers_by_its_id_and_alerts_honour_on_alert() -> None:
    manual = PendingRequest(id=5, source="manual", corpus_revision=8, reason="new tokenizer")
    d = should_retrain(POLICY, facts(request=manual))
    assert (d.trigger, d.key, d.reason) == ("manual", "retrain:manual:req5", "manual retrain request #5: new tokenizer")
    # A request retrains even when the newest model is trained on the current revision.
    assert should_retrain(POLICY, facts(revision=7, chunks=1000, request=manual)).retrain
    alert = PendingRequest(id=6, source="alert", corpus_revision=8)
    assert should_retrain(POLICY, facts(request=alert)).key == "retrain:alert:req6"
    ignored = should_retrain(RetrainPolicy(on_alert=False), facts(request=alert))
    assert not ignored.retrain and "alert retrain request #6 ignored (retrain.on_alert is off)" in ignored.reason


def test_policy_validates_its_thresholds() -> None:
    with pytest.raises(ValueError, match="growth_fraction"):
        RetrainPolicy(growth_fraction=0)
    with pytest.raises(ValueError, match="oov_threshold"):
        RetrainPolicy(oov_threshold=1.5)
    with pytest.raises(ValueError, match="min_signal_chunks"):
        RetrainPolicy(min_signal_chunks=0)


# ---------------------------------------------------------------------------------------------- drift signals
def test_embedding_shift() -> None:
    centroid = np.array([1.0, 0.0])
    assert embedding_shift(np.array([[1.0, 0.0], [2.0, 0.0]]), centroid) == pytest.approx(0.0)
    assert embedding_shift(np.array([[0.0, 1.0]]), centroid) == pytest.approx(1.0)
    assert embedding_shift(np.array([[1.0, 1.0]]), centroid) == pytest.approx(1 - 2**-0.5)
    assert embedding_shift(np.zeros((3, 2)), centroid) == 1.0  # nothing the model knows
    assert embedding_shift(np.zeros((0, 2)), centroid) == 0.0
    assert embedding_shift(np.array([[1.0, 0.0]]), None) == 0.0


def test_oov_rate_counts_tokens_the_vocabulary_does_not_know() -> None:
    known = {"retrieval", "index", "cafe"}.__contains__
    assert oov_rate(["Retrieval index", "index of a zzyzx"], known) == pytest.approx(2 / 5)  # "a" is no token
    assert oov_rate(["Café"], known) == 0.0  # accents stripped, as the LSA analyzer does
    assert oov_rate([""], known) == 0.0


def test_running_centroid_and_batch_drift() -> None:
    corpus = Centroid.empty(2)
    corpus.add(np.array([[1.0, 0.0], [3.0, 0.0]]))
    restored = Centroid.from_bytes(corpus.to_bytes(), corpus.count)
    assert restored.count == 2 and np.allclose(restored.mean, [2.0, 0.0])  # type: ignore[arg-type]
    batch = BatchDrift({"known"}.__contains__)
    batch.observe(["known words", "known"], np.array([[0.0, 1.0], [0.0, 1.0]]))
    assert batch.chunks == 2 and batch.oov_rate == pytest.approx(1 / 3)
    assert batch.shift_from(restored) == pytest.approx(1.0)
    assert batch.batch is not None
    merged = restored.plus(batch.batch)
    assert merged.count == 4 and np.allclose(merged.sum, [4.0, 2.0])
    assert np.allclose(merged.minus(batch.batch).sum, restored.sum)


# ---------------------------------------------------------------------------------------------- defs.yaml
HEADER = "type: runtime_ops.components.RetrievalPipeline\nattributes:\n  name: alpha\n"


def _spec(body: str, tmp_path: Path) -> RetrainSpec:
    import yaml

    attrs = PipelineAttributes.model_validate(yaml.safe_load(HEADER + body)["attributes"])
    return resolve_spec(attrs, load_settings(), base_dir=tmp_path).retrain


def test_retrain_section_defaults_nulls_and_validation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(tmp_path))
    assert _spec("", tmp_path) == RetrainSpec(growth_fraction=0.2, drift_threshold=0.25, oov_threshold=0.3)
    spec = _spec("  retrain:\n    growth_fraction: 0.5\n    oov_threshold: null\n    on_alert: false\n", tmp_path)
    assert spec == RetrainSpec(growth_fraction=0.5, drift_threshold=0.25, oov_threshold=None, on_alert=False)
    assert _spec("  retrain:\n    drift_threshold: null\n", tmp_path).drift_threshold is None

    path = tmp_path / "pipelines" / "alpha" / "defs.yaml"
    path.parent.mkdir(parents=True)
    for body, message in (
        ("  retrain:\n    growth_fraction: 0\n", "attributes.retrain.growth_fraction: Input should be greater than 0"),
        ("  retrain:\n    oov_threshold: 1.5\n", "attributes.retrain.oov_threshold: Input should be less than or"),
        ("  retrain:\n    drift_threshold: -1\n", "attributes.retrain.drift_threshold: Input should be greater"),
        ("  retrain:\n    min_signal_chunks: 0\n", "attributes.retrain.min_signal_chunks: Input should be greater"),
    ):
        path.write_text(HEADER + body)
        with pytest.raises(PipelineConfigError) as exc:
            check_folder(path.parent.parent)
        assert f"{path}:5: {message}" in str(exc.value)
