"""Durable metric series as the store keeps them (`metric_series`): label sets, cumulative buckets, deltas.

Pure: no SQLAlchemy, no Prometheus client at import. `runtime_ops.observability.metrics` defines the metric
families on top of these; the store writes the one series it observes itself (landing lag) and counts the
observations it failed to write, so it never imports the observability package.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

# metric_series.labels is a VARCHAR(512).
MAX_LABELS_CHARS = 512
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

# The series the store itself writes (their families are described in runtime_ops.observability.metrics).
LANDING_LAG = "runtime_ops_landing_lag_seconds"
LANDING_LAG_BOUNDS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 21600.0, 86400.0)
WRITE_ERRORS = "runtime_ops_metrics_write_errors_total"


@dataclass(frozen=True)
class SeriesDelta:
    """What one observation site adds to one durable series: counts, sum and (histograms) cumulative buckets."""

    name: str
    labels: str  # canonical JSON
    kind: Literal["counter", "histogram"]
    count: int
    sum: float
    buckets: dict[str, int] | None = None


@dataclass
class HistogramData:
    count: int = 0
    sum: float = 0.0
    buckets: dict[str, int] = field(default_factory=dict)


def le_label(bound: float) -> str:
    """A bucket bound as Prometheus writes it in `le` (`0.5`, `1.0`, `+Inf`), prometheus_client's own format."""
    from prometheus_client.utils import floatToGoString

    return str(floatToGoString(bound))


def bucket_counts(bounds: Sequence[float], values: Iterable[float]) -> dict[str, int]:
    """Cumulative counts of `values` per upper bound (`le`), `+Inf` included: Prometheus histogram buckets.

    A value equal to a bound counts in that bound's bucket (`le` is "less than or equal"). NaN is refused: it
    would make the sum NaN forever.
    """
    ordered = sorted(float(b) for b in bounds)
    if any(math.isnan(b) for b in ordered) or len(set(ordered)) != len(ordered):
        raise ValueError(f"bucket bounds must be distinct numbers, got {list(bounds)}")
    if not ordered or ordered[-1] != math.inf:
        ordered.append(math.inf)
    per_bucket = [0] * len(ordered)
    for v in values:
        v = float(v)
        if math.isnan(v):
            raise ValueError("NaN is not an observation")
        for i, b in enumerate(ordered):
            if v <= b:
                per_bucket[i] += 1
                break
    out: dict[str, int] = {}
    running = 0
    for b, n in zip(ordered, per_bucket, strict=True):
        running += n
        out[le_label(b)] = running
    return out


def merge_buckets(a: Mapping[str, int] | None, b: Mapping[str, int] | None) -> dict[str, int]:
    """Add two cumulative bucket maps (bound by bound). Cumulative counts of disjoint observation sets add up."""
    out = dict(a or {})
    for le, n in (b or {}).items():
        out[le] = out.get(le, 0) + int(n)
    return out


def canonical_labels(labels: Mapping[str, object] | None, expected: Sequence[str] | None = None) -> str:
    """The label set as canonical JSON (sorted names, string values, no spaces): one series, one key.

    With `expected`, the names must be exactly those (a typo must not open a new series). Raises ValueError for
    invalid names or a label set longer than the column holds.
    """
    items = {str(k): "" if v is None else str(v) for k, v in (labels or {}).items()}
    for name in items:
        if not _LABEL_NAME.match(name) or name.startswith("__"):
            raise ValueError(f"invalid Prometheus label name {name!r}")
    if expected is not None and set(items) != set(expected):
        raise ValueError(f"labels {sorted(items)} do not match the metric's labels {sorted(expected)}")
    text = json.dumps(dict(sorted(items.items())), separators=(",", ":"), ensure_ascii=False)
    if len(text) > MAX_LABELS_CHARS:
        raise ValueError(f"label set longer than {MAX_LABELS_CHARS} characters: {text[:80]}...")
    return text


def decode_labels(text: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in json.loads(text).items()}


def histogram(name: str, labels: str, bounds: Sequence[float], values: Sequence[float]) -> SeriesDelta:
    """The delta of observing `values` in the histogram `name` (labels already canonical)."""
    return SeriesDelta(
        name=name,
        labels=labels,
        kind="histogram",
        count=len(values),
        sum=float(math.fsum(float(v) for v in values)),
        buckets=bucket_counts(bounds, values),
    )


def counter(name: str, labels: str, by: float = 1) -> SeriesDelta:
    """The delta of adding `by` to the counter `name`: its value is `sum`; `count` counts the increments."""
    if by < 0 or math.isnan(by):
        raise ValueError(f"a counter only goes up; got {by}")
    return SeriesDelta(name=name, labels=labels, kind="counter", count=1, sum=float(by))


# ------------------------------------------------------------------ observations this process failed to write
_errors_lock = threading.Lock()
_write_errors: dict[str, int] = {}


def write_errors() -> dict[str, int]:
    """Observations this process failed to write, by metric (also counted durably when the store allows)."""
    with _errors_lock:
        return dict(_write_errors)


def note_write_error(name: str) -> None:
    with _errors_lock:
        _write_errors[name] = _write_errors.get(name, 0) + 1
