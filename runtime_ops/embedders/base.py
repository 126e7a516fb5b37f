"""What every embedder offers the pipeline: a kind, a dimension, and unit-length float32 rows for texts.

The LSA model (`lsa.py`), an OpenAI-compatible endpoint (`openai.py`) and a local sentence-transformers model
(`sentence.py`) all satisfy `TextEmbedder`, so training, evaluation, embedding the corpus and answering use one
code path whichever a pipeline chooses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TextEmbedder(Protocol):
    kind: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 rows of shape (len(texts), dim), L2-normalised (an all-zero row: no signal), in input order."""
        ...
