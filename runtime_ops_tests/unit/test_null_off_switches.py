"""`null` in a pipeline's defs.yaml loads the way the code location loads it (Dagster's resolution, not only the
schema check): every optional field takes it, and each documented off-switch then means off."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from runtime_ops.components.loading import load_specs
from runtime_ops.models.sensors import retrain_policy
from runtime_ops.pipeline.attributes import PipelineAttributes
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.policies.retrain import DriftFacts, ModelFacts, RetrainFacts, should_retrain
from runtime_ops.settings import load_settings

# Fields that need sibling fields (an endpoint section needs its endpoint, model and dimensions).
NEEDS_SIBLINGS = ("embedder", "openai")


def _optional_fields(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        if path[: len(NEEDS_SIBLINGS)] == NEEDS_SIBLINGS and len(path) > len(NEEDS_SIBLINGS):
            continue
        args = typing.get_args(info.annotation)
        if type(None) in args:
            yield path
        for arg in args or (info.annotation,):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                yield from _optional_fields(arg, path)


OPTIONAL_FIELDS = sorted(_optional_fields(PipelineAttributes))


def _load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attributes: dict[str, Any]) -> PipelineSpec:
    """The pipeline `alpha` declared with `attributes`, loaded as the code location loads it."""
    path = tmp_path / "pipelines" / "alpha" / "defs.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"type": "runtime_ops.components.RetrievalPipeline", "attributes": {"name": "alpha", **attributes}}
    path.write_text(yaml.safe_dump(document))
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RUNTIME_OPS_PIPELINES_DIR", str(path.parent.parent))
    return load_specs(load_settings())["alpha"]


def _nested(path: tuple[str, ...], value: object) -> dict[str, Any]:
    tree: dict[str, Any] = {path[-1]: value}
    for name in reversed(path[:-1]):
        tree = {name: tree}
    return tree


def test_the_walk_finds_the_documented_off_switches() -> None:
    assert {("retrain", "growth_fraction"), ("retrain", "drift_threshold"), ("schedules", "retrain_cron")} <= set(
        OPTIONAL_FIELDS
    )


@pytest.mark.parametrize("path", OPTIONAL_FIELDS, ids=[".".join(p) for p in OPTIONAL_FIELDS])
def test_every_optional_field_loads_null(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: tuple[str, ...]
) -> None:
    _load(tmp_path, monkeypatch, _nested(path, None))


V1 = ModelFacts(version=1, chunks=100, corpus_revision=1)
# Past every default threshold: the corpus doubled, a batch shifted by 0.9 and is half unknown words.
PAST_EVERY_THRESHOLD = RetrainFacts(
    model=V1,
    chunks=200,
    corpus_revision=5,
    drift=DriftFacts(max_embedding_shift=0.9, shift_revision=3, max_oov_rate=0.5, oov_revision=4),
)


def test_retrain_conditions_set_to_null_are_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert should_retrain(retrain_policy(_load(tmp_path, monkeypatch, {}).retrain), PAST_EVERY_THRESHOLD).retrain
    triggers = {"growth_fraction": "growth", "drift_threshold": "drift", "oov_threshold": "oov"}
    off: dict[str, None] = {}
    for field in triggers:
        off[field] = None
        spec = _load(tmp_path, monkeypatch, {"retrain": dict(off)})
        assert getattr(spec.retrain, field) is None
        decision = should_retrain(retrain_policy(spec.retrain), PAST_EVERY_THRESHOLD)
        assert decision.trigger not in {triggers[name] for name in off}, (off, decision)
    all_off = should_retrain(
        retrain_policy(_load(tmp_path, monkeypatch, {"retrain": off}).retrain), PAST_EVERY_THRESHOLD
    )
    assert not all_off.retrain
    assert all_off.reason.startswith("every retrain condition is off")


def test_schedules_set_to_null_are_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _load(tmp_path, monkeypatch, {"schedules": {"retrain_cron": None, "regression_cron": None}})
    assert spec.retrain_cron is None and spec.regression_cron is None
