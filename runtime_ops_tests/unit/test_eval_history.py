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
            EvaluatedVersion(2, {"recall@5": 0.8, "mrr": 0.6}, "needs approval", question_set="b" * 64, questions=45),
            EvaluatedVersion(
                1, {"recall@5": 0.7, "mrr": 0.65}, "production", production=True, question_set="b" * 64, questions=45
            ),
        ],
        metrics=("recall@5", "mrr"),
        highlight=2,
    )
    lines = md.splitlines()
    assert lines[0] == "| version | set | recall@5 | mrr | verdict |"
    assert lines[2].startswith("| v1 (production) | `bbbbbbbbbbbb (45 q)` |")
    assert lines[3].startswith("| **v2** | `bbbbbbbbbbbb (45 q)` |")
    assert "0.800 (+0.100)" in lines[3] and "0.600 (-0.050)" in lines[3]
    assert "(+" not in lines[2]  # the first row has nothing to compare with
    assert "Best on set `bbbbbbbbbbbb (45 q)`: recall@5 v2 (0.800), mrr v1 (0.650)" in md


def test_rows_on_different_question_sets_are_not_compared() -> None:
    md = history_markdown(
        [
            EvaluatedVersion(1, {"mrr": 0.9}, question_set="a" * 64, questions=34),
            EvaluatedVersion(2, {"mrr": 0.6}, question_set="b" * 64, questions=45),
            EvaluatedVersion(3, {"mrr": 0.7}, question_set="b" * 64, questions=45),
        ],
        metrics=("mrr",),
        highlight=3,
    )
    lines = md.splitlines()
    assert lines[2] == "| v1 | `aaaaaaaaaaaa (34 q)` | `" + bar(0.9) + "` 0.900 | n/a |"
    assert "(" not in lines[3].split("|")[3], "v2 is on another set than v1: no change shown"
    assert "0.700 (+0.100)" in lines[4]
    # v1's 0.900 was scored on another set: it is not the best on v3's set.
    assert md.endswith("Best on set `bbbbbbbbbbbb (45 q)`: mrr v3 (0.700)")


def test_missing_metric_and_empty_history() -> None:
    md = history_markdown([EvaluatedVersion(1, {"mrr": 0.5})], metrics=("recall@5", "mrr"))
    assert "| v1 | n/a |" in md
    assert history_markdown([]) == "_No evaluated model versions yet._"
