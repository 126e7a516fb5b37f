"""A small, genuinely learned text embedder: TF-IDF followed by truncated SVD (LSA).

It trains on a couple of CPU cores in seconds and needs no downloads, which is what lets the
pipeline retrain on every landing batch. The model is stored as plain arrays plus a JSON header
(never pickle) in a byte-deterministic container, so the sha256 of the bytes identifies a model
and the approval gate can bind a human decision to exactly one candidate.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix
    from sklearn.feature_extraction.text import CountVectorizer

__all__ = ["Embedder", "EmbedderParams", "digest", "train_embedder"]

# Container layout: MAGIC | u32 format version | u64 header length | header JSON | arrays | sha256.
# The trailing checksum lets from_bytes tell truncated or corrupted blobs from valid ones.
MAGIC = b"RTOPSEMB"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sIQ")
_CHECKSUM_LEN = 32
_ALLOWED_DTYPES = {"<f4": np.dtype("<f4"), "<f8": np.dtype("<f8")}

# The analyzer is recorded in the header so a model keeps tokenising the way it was trained even if
# these defaults change in a later release.
_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
_STRIP_ACCENTS = "unicode"


@dataclass
class EmbedderParams:
    """Training hyper-parameters; `dim` is an upper bound, the corpus may support fewer dimensions."""

    dim: int = 128
    max_features: int = 50000
    ngram_max: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("dim", "max_features", "ngram_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"EmbedderParams.{name} must be a positive integer, got {value!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"EmbedderParams.seed must be a non-negative integer, got {self.seed!r}")

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EmbedderParams:
        known = {"dim", "max_features", "ngram_max", "seed"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown EmbedderParams fields: {sorted(unknown)}")
        return cls(**dict(data))


def digest(data: bytes) -> str:
    """sha256 hex digest; applied to `Embedder.to_bytes()` it identifies a model."""
    return hashlib.sha256(data).hexdigest()


class Embedder:
    """A trained TF-IDF + LSA embedder. Construct with `train_embedder` or `Embedder.from_bytes`."""

    kind = "lsa"
    # Tokenising holds the GIL: long passes embed in forked processes (`runtime_ops.embedders.pool`).
    cpu_bound_single_thread = True

    def __init__(
        self,
        *,
        vocabulary: Sequence[str],
        idf: np.ndarray,
        components: np.ndarray,
        params: EmbedderParams,
        token_pattern: str = _TOKEN_PATTERN,
        strip_accents: str | None = _STRIP_ACCENTS,
        lowercase: bool = True,
    ) -> None:
        vocab = list(vocabulary)
        # Arrays are normalised to the exact dtypes that get serialised, so inference is identical
        # before and after a to_bytes/from_bytes round trip.
        idf_arr = np.ascontiguousarray(idf, dtype="<f8")
        comp_arr = np.ascontiguousarray(components, dtype="<f4")
        if len(set(vocab)) != len(vocab):
            raise ValueError("vocabulary contains duplicate terms")
        if idf_arr.shape != (len(vocab),):
            raise ValueError(f"idf shape {idf_arr.shape} does not match vocabulary size {len(vocab)}")
        if comp_arr.ndim != 2 or comp_arr.shape[1] != len(vocab) or comp_arr.shape[0] < 1:
            raise ValueError(f"components shape {comp_arr.shape} does not match (dim>=1, vocabulary={len(vocab)})")
        if not (np.all(np.isfinite(idf_arr)) and np.all(np.isfinite(comp_arr))):
            raise ValueError("model arrays contain non-finite values")
        self._vocabulary = vocab
        self._idf = idf_arr
        self._components = comp_arr
        self.params = params
        self._token_pattern = token_pattern
        self._strip_accents = strip_accents
        self._lowercase = lowercase
        # Derived lazily: the transposed float32 matrix and the vectoriser are inference caches only.
        self._components_t: np.ndarray | None = None
        self._vectorizer: CountVectorizer | None = None
        self._terms: frozenset[str] | None = None

    @property
    def dim(self) -> int:
        """Effective output dimension (may be below params.dim on a small corpus)."""
        return int(self._components.shape[0])

    @property
    def vocabulary_size(self) -> int:
        return len(self._vocabulary)

    def knows_term(self, term: str) -> bool:
        """Whether `term` (lowercased, as the analyzer emits it) is in the vocabulary (drift: the OOV rate)."""
        if self._terms is None:
            self._terms = frozenset(self._vocabulary)
        return term in self._terms

    def embed(self, texts: Sequence[str], batch_size: int = 512) -> np.ndarray:
        """Embed texts as float32 rows of unit length (all-zero for texts with no known term)."""
        if isinstance(texts, str):
            # A bare string is a Sequence[str] of characters; embedding each letter is never intended.
            raise TypeError("embed() takes a sequence of texts, not a single string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            out[start : start + len(batch)] = self._embed_batch(list(batch))
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        tfidf = self._tfidf(texts)
        if self._components_t is None:
            self._components_t = np.ascontiguousarray(self._components.T)
        dense = np.asarray(tfidf @ self._components_t, dtype=np.float32)
        return _l2_normalize_rows(dense)

    def _tfidf(self, texts: list[str]) -> csr_matrix:
        """Reproduce TfidfVectorizer(sublinear_tf=True, norm='l2') from the stored vocabulary and idf."""
        from sklearn.preprocessing import normalize

        counts = self._get_vectorizer().transform(texts).tocsr()
        data = counts.data
        np.log(data, out=data)
        data += 1.0
        data *= self._idf[counts.indices].astype(np.float32)
        return cast("csr_matrix", normalize(counts, norm="l2", copy=False))  # return_norm=False: the matrix

    def _get_vectorizer(self) -> CountVectorizer:
        if self._vectorizer is None:
            from sklearn.feature_extraction.text import CountVectorizer

            self._vectorizer = CountVectorizer(
                vocabulary={term: i for i, term in enumerate(self._vocabulary)},
                ngram_range=(1, self.params.ngram_max),
                lowercase=self._lowercase,
                token_pattern=self._token_pattern,
                strip_accents=self._strip_accents,
                dtype=np.float32,  # pyright: ignore[reportArgumentType]  # sklearn is untyped: dtype inferred from its np.int64 default
            )
        return self._vectorizer

    # -- serialisation -------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        arrays = [("idf", self._idf), ("components", self._components)]
        header = {
            "format": "runtime_ops.tfidf_lsa_embedder",
            "format_version": FORMAT_VERSION,
            "params": self.params.to_dict(),
            "analyzer": {
                "lowercase": self._lowercase,
                "strip_accents": self._strip_accents,
                "token_pattern": self._token_pattern,
            },
            "vocabulary": self._vocabulary,
            "arrays": [{"name": n, "dtype": a.dtype.str, "shape": list(a.shape)} for n, a in arrays],
        }
        # sort_keys + fixed separators: the header bytes depend only on the model, never on dict order.
        header_bytes = json.dumps(
            header, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False
        ).encode("utf-8")
        parts = [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes)), header_bytes]
        parts.extend(a.tobytes(order="C") for _, a in arrays)
        body = b"".join(parts)
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes) -> Embedder:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ValueError(f"embedder data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _PREFIX.size + _CHECKSUM_LEN:
            raise ValueError(f"not an embedder model: {len(data)} bytes is too short")
        magic, version, header_len = _PREFIX.unpack_from(data)
        if magic != MAGIC:
            raise ValueError("not an embedder model: bad magic bytes")
        if version != FORMAT_VERSION:
            raise ValueError(f"unsupported embedder format version {version} (expected {FORMAT_VERSION})")
        body, checksum = data[:-_CHECKSUM_LEN], data[-_CHECKSUM_LEN:]
        if hashlib.sha256(body).digest() != checksum:
            raise ValueError("embedder model is truncated or corrupted: checksum mismatch")
        header_end = _PREFIX.size + header_len
        if header_end > len(body):
            raise ValueError("embedder model is truncated: header runs past the end of the data")
        try:
            header = json.loads(body[_PREFIX.size : header_end].decode("utf-8"))
            params = EmbedderParams.from_dict(header["params"])
            analyzer = header["analyzer"]
            vocabulary = header["vocabulary"]
            specs = header["arrays"]
            if header.get("format_version") != FORMAT_VERSION:
                raise ValueError("header format_version disagrees with the container")
            if not isinstance(vocabulary, list) or not all(isinstance(t, str) for t in vocabulary):
                raise ValueError("vocabulary must be a list of strings")
            if analyzer["strip_accents"] not in (None, "ascii", "unicode"):
                raise ValueError(f"unsupported strip_accents {analyzer['strip_accents']!r}")
            arrays, offset = _read_arrays(body, specs, header_end)
            if offset != len(body):
                raise ValueError(f"{len(body) - offset} unexpected trailing bytes")
            return cls(
                vocabulary=vocabulary,
                idf=arrays["idf"],
                components=arrays["components"],
                params=params,
                token_pattern=str(analyzer["token_pattern"]),
                strip_accents=analyzer["strip_accents"],
                lowercase=bool(analyzer["lowercase"]),
            )
        except (AttributeError, KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"invalid embedder model: {exc}") from exc


def _read_arrays(body: bytes, specs: Any, offset: int) -> tuple[dict[str, np.ndarray], int]:
    if not isinstance(specs, list):
        raise ValueError("arrays must be a list")
    arrays: dict[str, np.ndarray] = {}
    for spec in specs:
        dtype = _ALLOWED_DTYPES.get(spec["dtype"])
        if dtype is None:
            raise ValueError(f"unsupported array dtype {spec['dtype']!r}")
        shape = tuple(int(s) for s in spec["shape"])
        if any(s < 0 for s in shape):
            raise ValueError(f"negative array shape {shape}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if offset + nbytes > len(body):
            raise ValueError(f"array {spec['name']!r} runs past the end of the data")
        # copy(): the result must not keep the whole blob alive nor be read-only.
        arrays[str(spec["name"])] = (
            np.frombuffer(body, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset).reshape(shape).copy()
        )
        offset += nbytes
    missing = {"idf", "components"} - set(arrays)
    if missing:
        raise ValueError(f"missing arrays: {sorted(missing)}")
    return arrays, offset


def _l2_normalize_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # Zero rows stay zero instead of becoming NaN: "no known terms" must be representable.
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def _min_df_for(n_docs: int) -> int:
    # On a small corpus a term seen once is often the most discriminative word a document has
    # (a name, a product); once the corpus is large, singletons are mostly typos and IDs that crowd
    # real terms out of the max_features budget.
    if n_docs < 200:
        return 1
    if n_docs < 10000:
        return 2
    return 3


def train_embedder(texts: Sequence[str], params: EmbedderParams = EmbedderParams()) -> Embedder:
    """Fit TF-IDF (unigrams..ngram_max, sublinear tf) then LSA to at most params.dim dimensions."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from threadpoolctl import threadpool_limits

    if isinstance(texts, str):
        raise TypeError("train_embedder() takes a sequence of texts, not a single string")
    docs = [t for t in texts if isinstance(t, str) and t.strip()]
    if len(docs) < 2:
        raise ValueError(
            f"need at least 2 non-empty texts to train an embedder, got {len(docs)} (of {len(texts)} given)"
        )

    def fit(min_df: int, max_df: float) -> tuple[TfidfVectorizer, Any]:
        vectorizer = TfidfVectorizer(
            ngram_range=(1, params.ngram_max),
            sublinear_tf=True,
            min_df=min_df,
            max_df=max_df,
            max_features=params.max_features,
            lowercase=True,
            token_pattern=_TOKEN_PATTERN,
            strip_accents=_STRIP_ACCENTS,
            dtype=np.float64,
        )
        return vectorizer, vectorizer.fit_transform(docs)

    # Near-universal terms carry no retrieval signal; only prune them once "near-universal" is meaningful.
    max_df = 0.95 if len(docs) >= 20 else 1.0
    try:
        vectorizer, matrix = fit(_min_df_for(len(docs)), max_df)
    except ValueError:
        # Pruning removed every term (e.g. a corpus of disjoint texts): fall back to keeping everything.
        try:
            vectorizer, matrix = fit(1, 1.0)
        except ValueError as exc:
            raise ValueError(f"cannot train an embedder: no usable terms in the corpus ({exc})") from exc

    n_docs, n_terms = matrix.shape
    if n_terms < 2:
        raise ValueError(f"cannot train an embedder: the corpus has only {n_terms} distinct term(s)")
    dim = min(params.dim, n_docs, n_terms)
    svd = TruncatedSVD(n_components=dim, algorithm="randomized", n_iter=7, random_state=params.seed)
    # One BLAS thread: the matrices are small enough that threads mostly spin against the Dagster
    # processes sharing the box, and a fixed thread count keeps the summation order (so the model
    # bytes and their digest) independent of how many cores the training host has.
    with threadpool_limits(limits=1):
        svd.fit(matrix)

    assert svd.components_ is not None  # set by fit
    vocabulary = [""] * n_terms
    for term, index in vectorizer.vocabulary_.items():
        vocabulary[index] = term
    return Embedder(
        vocabulary=vocabulary,
        idf=vectorizer.idf_,
        components=svd.components_,
        params=EmbedderParams(**params.to_dict()),
    )
