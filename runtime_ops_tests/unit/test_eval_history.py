from __future__ import annotations

from runtime_ops.models.history import BAR_WIDTH, EvaluatedVersion, bar, history_markdown


def test_bar_scales_to_the_width_at_eighth_resolution() -> None:
    assert bar(1.0) == "█" * BAR_WIDTH
    assert bar(0.0) == ""
    assert bar(0.5) == "█" * (BAR_WIDTH // 2)
    assert bar(1 / (BAR_WIDTH * 8)) == "▏"
    assert bar(2.0) == bar(1.0) and bar(-1.0) == ""
    assert bar(float("nan")) == ""


def test_history_lists_versions_oldest_first_with_deltas_and_marks_production() -> None:
    md = history_markdown(
        [
            EvaluatedVersion(2, {"recall@5": 0.8, "mrr": 0.6}, "needs approval"),
            EvaluatedVersion(1, {"recall@5": 0.7, "mrr": 0.65}, "auto-approve (first model)", production=True),
        ],
        metrics=("recall@5", "mrr"),
        highlight=2,
    )
    lines = md.splitlines()
    assert lines[0] == "| version | recall@5 | mrr | verdict |"
    assert lines[2].startswith("| v1 (production) |")
    assert lines[3].startswith("| **v2** |")
    assert "0.800 (+0.100)" in lines[3] and "0.600 (-0.050)" in lines[3]
    assert "(+" not in lines[2]  # the first row has nothing to compare with
    assert "Best: recall@5 v2 (0.800), mrr v1 (0.650)" in md


def test_missing_metric_and_empty_history() -> None:
    md = history_markdown([EvaluatedVersion(1, {"mrr": 0.5})], metrics=("recall@5", "mrr"))
    assert "| v1 | n/a |" in md
    assert history_markdown([]) == "_No evaluated model versions yet._"
