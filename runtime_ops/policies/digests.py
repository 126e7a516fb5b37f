"""The digests that bind a human decision to exactly what it was shown: a report's canonical sha256, the (model,
report) pair's, and a gated asset's materialization's."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["candidate_digest", "materialization_digest", "report_digest"]

_SIGNIFICANT_DIGITS = 12


def candidate_digest(model_digest: str, report_digest: str) -> str:
    """sha256 identifying (model, evaluation report): an approval is valid for exactly this pair."""
    for name, value in (("model_digest", model_digest), ("report_digest", report_digest)):
        # Forbidding newlines keeps the "model:<a>\nreport:<b>" encoding unambiguous (prefix-free).
        if not isinstance(value, str) or not value or "\n" in value:
            raise ValueError(f"{name} must be a non-empty single-line string, got {value!r}")
    payload = f"model:{model_digest}\nreport:{report_digest}".encode()
    return hashlib.sha256(payload).hexdigest()


def materialization_digest(target: str, data_version: str | None, metadata: Mapping[str, object]) -> str:
    """sha256 naming one materialization of a gated asset: of its data version when it has one (Dagster gives every
    materialization one; it repeats only for the same code version on the same inputs, i.e. the same data), else of
    its metadata values. The target's label, partition included, is part of it, so equal data in two partitions
    never shares a request."""
    what: dict[str, object] = {"target": target}
    what.update({"data_version": data_version} if data_version else {"metadata": dict(metadata)})
    # Metadata may hold values JSON has no form for: their text is what the digest binds.
    payload = json.dumps(what, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(payload.encode("ascii")).hexdigest()


def report_digest(report: Mapping[str, object]) -> str:
    """sha256 of canonical JSON: sorted keys, floats rounded to 12 significant digits."""
    canonical = json.dumps(
        _canonical(report, "report"),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        allow_nan=False,
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _canonical(value: Any, where: str) -> Any:
    # numpy only here: loading the code location (which imports the asset gate's digest) must not pay for it.
    import numpy as np

    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.generic):
        value = value.item()  # numpy scalars become their Python equivalents
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is not finite ({value}); a report must hold finite numbers")
        # Rounding hides last-bit noise between runs; + 0.0 folds -0.0 into 0.0.
        return float(f"{value:.{_SIGNIFICANT_DIGITS}g}") + 0.0
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            # Non-string keys would be coerced by json (1 and "1" colliding), so refuse them.
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}")
            out[key] = _canonical(item, f"{where}.{key}")
        return out
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return [_canonical(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise ValueError(f"{where} has a value of unsupported type {type(value).__name__}")
