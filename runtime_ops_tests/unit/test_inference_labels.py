"""The inference pipeline's pure parts: ticket files, the request and its digest, reading a reply as a label,
accuracy on the labelled sample, cost sums, the label set's evidence and digest, and the stand-in model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime_ops.inference.completion import LabelledItem, Labelling
from runtime_ops.inference.costs import Prices, Usage, total_cost, total_usage
from runtime_ops.inference.labels import accuracy, parse_label
from runtime_ops.inference.prompts import build_request, request_digest
from runtime_ops.inference.stand_in import STAND_IN_MODEL, LocalKeywordClassifier
from runtime_ops.inference.summary import evidence, label_set_digest
from runtime_ops.inference.tickets import Ticket, dedupe, parse_ticket_file

LABELS = ("billing", "bug", "account", "feature_request", "question")
SHIPPED = Path(__file__).resolve().parents[2] / "runtime_ops" / "demo" / "tickets"


# --- ticket files ----------------------------------------------------------------------------------------------


def test_a_jsonl_file_yields_its_tickets_and_refuses_bad_lines_with_line_and_fix() -> None:
    data = "\n".join(
        [
            json.dumps({"id": "T-1", "text": "charged twice", "label": "billing"}),
            "",
            "{not json",
            json.dumps({"id": "T-2"}),
            json.dumps({"id": 7, "text": "integer ids are read as text"}),
            json.dumps({"id": "T-3", "text": "x", "label": "spam"}),
            json.dumps(["a", "list"]),
        ]
    ).encode()
    tickets, refused = parse_ticket_file("in/a.jsonl", data, LABELS)
    assert [(t.id, t.label, t.source) for t in tickets] == [
        ("T-1", "billing", "in/a.jsonl:1"),
        ("7", None, "in/a.jsonl:5"),
    ]
    reasons = {r.source: r.reason for r in refused}
    assert set(reasons) == {"in/a.jsonl:3", "in/a.jsonl:4", "in/a.jsonl:6", "in/a.jsonl:7"}
    assert "one JSON object per line" in reasons["in/a.jsonl:3"]
    assert '"text" must be a non-empty string' in reasons["in/a.jsonl:4"]
    assert "'spam' is not one of the declared labels (billing, bug" in reasons["in/a.jsonl:6"]


def test_a_text_file_is_one_ticket_named_by_its_key_and_non_utf8_is_refused() -> None:
    tickets, refused = parse_ticket_file("inbox/T-9.txt", b"  The app crashes.\n", LABELS)
    assert tickets == [Ticket("T-9", "The app crashes.", None, "")] and refused == []
    tickets, refused = parse_ticket_file("inbox/bad.txt", b"\xff\xfe", LABELS)
    assert tickets == [] and "save the file as UTF-8" in refused[0].reason


def test_a_repeated_id_keeps_the_first_and_names_where_it_was() -> None:
    kept, refused = dedupe(
        [Ticket("A", "x", source="f:1"), Ticket("B", "y", source="f:2"), Ticket("A", "z", source="g:1")]
    )
    assert [t.text for t in kept] == ["x", "y"]
    assert refused[0].source == "g:1" and "already used at f:1" in refused[0].reason


# --- the request, the reply, accuracy --------------------------------------------------------------------------


def test_the_digest_follows_the_text_and_the_label_set_but_not_whitespace_around_the_text() -> None:
    base = request_digest(build_request("The app crashes", LABELS))
    assert request_digest(build_request("  The app crashes\n", LABELS)) == base
    assert request_digest(build_request("The app crashed", LABELS)) != base
    assert request_digest(build_request("The app crashes", LABELS[:-1])) != base
    request = build_request("The app crashes", LABELS)
    assert "model" not in request and request["temperature"] == 0
    assert "billing, bug, account, feature_request, question" in request["messages"][0]["content"]


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("bug", "bug"),
        ("  Bug.\n", "bug"),
        ('"feature_request"', "feature_request"),
        ("Label: account", "account"),
        ("feature-request", "feature_request"),
        ("The ticket is about billing.", "billing"),
        ("billing or account", None),  # two labels: never guessed
        ("spam", None),
        ("", None),
    ],
)
def test_a_reply_is_read_as_one_declared_label_or_none(reply: str, label: str | None) -> None:
    assert parse_label(reply, LABELS) == label


def test_accuracy_counts_only_the_labelled_sample_and_unparsed_predictions_as_wrong() -> None:
    measured = accuracy(
        [("bug", "bug"), ("billing", None), (None, "bug"), ("account", "billing"), ("question", "question")]
    )
    assert (measured.labelled, measured.correct, measured.value) == (4, 2, 0.5)
    assert accuracy([(None, "bug")]).value is None  # nothing measured is not 0 (nor 1)


def test_cost_is_tokens_times_the_per_1k_prices_and_sums_round_to_a_millionth() -> None:
    prices = Prices(prompt_per_1k=0.15, completion_per_1k=0.6)
    assert prices.cost(Usage(2000, 500)) == pytest.approx(0.6)
    assert total_usage([Usage(1, 2), Usage(3, 4)]) == Usage(4, 6)
    assert total_cost([0.1] * 3) == 0.3
    with pytest.raises(ValueError, match="prices must be >= 0"):
        Prices(prompt_per_1k=-1)


# --- the label set ---------------------------------------------------------------------------------------------


def _labelling(*labels: str | None, reused: int = 0) -> Labelling:
    items = [
        LabelledItem(f"T-{n}", f"d{n}", label, Usage(100, 1), 0.01, reused=n < reused) for n, label in enumerate(labels)
    ]
    return Labelling(items, "m-1", usage_unreported=0)


def test_evidence_reports_accuracy_tokens_cost_and_called_vs_reused() -> None:
    tickets = [Ticket("T-0", "a", "bug"), Ticket("T-1", "b", "billing"), Ticket("T-2", "c", None)]
    found = evidence(tickets, _labelling("bug", None, "account", reused=1))
    assert found["accuracy"] == 0.5 and found["labelled"] == 2 and found["correct"] == 1
    assert (found["items"], found["unparsed"], found["items_called"], found["items_reused"]) == (3, 1, 2, 1)
    assert (found["prompt_tokens"], found["completion_tokens"]) == (300, 3)
    assert found["cost_usd"] == 0.03 and found["run_cost_usd"] == 0.02 and found["model"] == "m-1"


def test_the_label_set_digest_changes_with_any_label_or_the_model_but_not_with_order_or_reuse() -> None:
    digest = label_set_digest(_labelling("bug", "billing"))
    assert label_set_digest(_labelling("bug", "billing", reused=2)) == digest
    reordered = _labelling("bug", "billing")
    assert label_set_digest(Labelling(list(reversed(reordered.items)), "m-1", 0)) == digest
    assert label_set_digest(_labelling("bug", "account")) != digest
    assert label_set_digest(Labelling(reordered.items, "m-2", 0)) != digest


# --- the stand-in model ----------------------------------------------------------------------------------------


def test_the_stand_in_is_deterministic_labels_by_keywords_and_falls_back_to_the_last_label() -> None:
    model = LocalKeywordClassifier(LABELS)
    assert model.model == STAND_IN_MODEL == "local-deterministic-stand-in"
    assert model.label("I was charged twice, please refund") == "billing"
    assert model.label("Thanks, all good now") == "question"  # no keyword: the catch-all, declared last
    completion = model.complete(build_request("The export crashes with an error", LABELS), item_id="T-1")
    assert completion.text == "bug" and completion.usage.completion_tokens == 1
    assert completion.usage.prompt_tokens > 10


def test_the_shipped_tickets_parse_and_the_stand_in_is_not_perfect_on_their_labelled_sample() -> None:
    tickets = []
    for path in sorted(SHIPPED.glob("*.jsonl")):
        found, refused = parse_ticket_file(path.name, path.read_bytes(), LABELS)
        assert refused == []
        tickets += found
    kept, repeated = dedupe(tickets)
    assert len(kept) == 40 and repeated == []
    model = LocalKeywordClassifier(LABELS)
    measured = accuracy((t.label, model.label(t.text)) for t in kept)
    # 20 of 22: below the demo gate's auto_approve threshold (0.92), so `make dev` shows a request waiting.
    assert (measured.labelled, measured.correct) == (22, 20)
