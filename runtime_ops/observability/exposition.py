"""Prometheus exposition of the metrics catalog: a family per definition, values and histograms added to it in
the exposition's order, and a parser for the exposition text (tests and the topology check)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from runtime_ops.observability.metrics import METRICS


def family_of(name: str) -> Metric:
    """A new, empty family for the catalog's metric `name`, of its kind, with its help and label names."""
    d = METRICS[name]
    if d.kind == "counter":
        return CounterMetricFamily(name, d.help, labels=list(d.labels))
    if d.kind == "gauge":
        return GaugeMetricFamily(name, d.help, labels=list(d.labels))
    return HistogramMetricFamily(name, d.help, labels=list(d.labels))


def add_value(family: Metric, labels: list[str], value: float) -> None:
    assert isinstance(family, (CounterMetricFamily, GaugeMetricFamily))
    family.add_metric(labels, value)


def add_histogram(family: Metric, labels: list[str], count: int, total: float, buckets: dict[str, int]) -> None:
    assert isinstance(family, HistogramMetricFamily)
    ordered = sorted_buckets(buckets)
    if not ordered or ordered[-1][0] != "+Inf":
        ordered.append(("+Inf", count))
    family.add_metric(labels, ordered, total)


def sorted_buckets(buckets: Mapping[str, int]) -> list[tuple[str, int]]:
    """Buckets in `le` order, `+Inf` last, as HistogramMetricFamily wants them."""
    return sorted(((le, int(n)) for le, n in buckets.items()), key=lambda kv: float(kv[0]))


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Exposition text -> {(sample name, frozenset of (label, value)): value}, with prometheus_client's parser.

    Sample names are as exposed: `..._total` for counters, `..._bucket` / `..._sum` / `..._count` for histograms
    (the bucket's `le` is one of its labels). For tests and the topology check.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = float(sample.value)
    return out
