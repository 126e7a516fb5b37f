"""`chunking: {max_tokens, overlap_tokens}` in a pipeline's defs.yaml: defaults from the embedder, and settings the
embedder cannot read refused at load with the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_ops.components.loading import PipelineConfigError, check_folder, load_specs
from runtime_ops.settings import load_settings

ST = "  embedder:\n    kind: sentence_transformers\n"


def declare(root: Path, body: str, name: str = "alpha") -> Path:
    path = root / name / "defs.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = f"type: runtime_ops.components.RetrievalPipeline\nattributes:\n  name: {name}\n"
    path.write_text(header + body)
    return path


def error_of(root: Path) -> str:
    with pytest.raises(PipelineConfigError) as exc:
        check_folder(root)
    return str(exc.value)


def test_max_tokens_above_the_models_window_fails_at_load(tmp_path: Path) -> None:
    path = declare(tmp_path, ST + "  chunking:\n    max_tokens: 512\n")
    assert error_of(tmp_path) == (
        f"{path}:7: attributes.chunking.max_tokens: 512 is above the window of the embedder (all-MiniLM-L6-v2 reads "
        "at most 256 tokens, special tokens included; the rest of a longer chunk would never be embedded); set it "
        "to at most 256 or leave it out"
    )
    declare(tmp_path, ST + "  chunking:\n    max_tokens: 256\n")
    assert [p.name for p in check_folder(tmp_path)] == ["alpha"]


def test_an_endpoint_window_is_its_declared_budget(tmp_path: Path) -> None:
    openai = "  embedder:\n    kind: openai\n    openai:\n      endpoint: http://127.0.0.1:9/v1\n"
    openai += "      model_name: m\n      dimensions: 8\n      max_input_tokens: 1000\n"
    path = declare(tmp_path, openai + "  chunking: {max_tokens: 1500}\n")
    assert f"{path}:11: attributes.chunking.max_tokens: 1500 is above the window of the embedder (m reads" in (
        error_of(tmp_path)
    )


def test_overlap_must_stay_below_max_tokens(tmp_path: Path) -> None:
    path = declare(tmp_path, "  chunking:\n    max_tokens: 100\n    overlap_tokens: 100\n")
    assert f"{path}:6: attributes.chunking.overlap_tokens: 100 must be below max_tokens (100)" in error_of(tmp_path)
    # Against the embedder's default max_tokens (the window, 256) when max_tokens is left out.
    path = declare(tmp_path, ST + "  chunking:\n    overlap_tokens: 300\n")
    assert error_of(tmp_path) == (
        f"{path}:7: attributes.chunking.overlap_tokens: 300 must be at least 0 and below max_tokens (256)"
    )
    path = declare(tmp_path, "  chunking:\n    max_tokens: 8\n")
    assert f"{path}:5: attributes.chunking.max_tokens: Input should be greater than or equal to 16" in error_of(
        tmp_path
    )


def test_defaults_follow_the_embedder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_ops.embedders.token_counts import declared_profile
    from runtime_ops.pipeline.chunking import LEGACY

    monkeypatch.setenv("RUNTIME_OPS_PIPELINES_DIR", str(tmp_path))
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(tmp_path / "home"))
    declare(tmp_path, ST + "  landing: {uri: a}\n", "alpha")
    declare(tmp_path, "  landing: {uri: b}\n", "beta")
    declare(tmp_path, "  landing: {uri: c}\n  chunking: {max_tokens: 200}\n", "gamma")
    specs = load_specs(load_settings())
    st = declared_profile(specs["alpha"].embedder, specs["alpha"].chunking)
    assert (st.kind, st.max_tokens, st.overlap_tokens, st.window) == ("tokenizer", 256, 32, 256)
    assert declared_profile(specs["beta"].embedder, specs["beta"].chunking) == LEGACY, "lsa keeps its chunks"
    lsa = declared_profile(specs["gamma"].embedder, specs["gamma"].chunking)
    assert (lsa.kind, lsa.max_tokens, lsa.overlap_tokens) == ("estimate", 200, 25)
