"""A model's reply read as one of the declared labels, and accuracy on the labelled sample (pure)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9_]+")


def parse_label(reply: str, labels: Sequence[str]) -> str | None:
    """The label a reply names: the reply itself (case, quotes, punctuation, a "label:" prefix ignored), else the one
    declared label it mentions as a word; None when it names none or several (counted as unparsed, never guessed)."""
    allowed = {label.lower(): label for label in labels}
    cleaned = reply.strip().lower().removeprefix("label:").strip().strip("\"'`.*").strip()
    if cleaned in allowed:
        return allowed[cleaned]
    words = set(_WORD.findall(cleaned.replace("-", "_")))
    named = [allowed[w] for w in allowed if w in words]
    return named[0] if len(named) == 1 else None


@dataclass(frozen=True)
class Accuracy:
    labelled: int  # tickets of the sample (with a reviewed label) that have a result
    correct: int

    @property
    def value(self) -> float | None:
        """correct / labelled; None with no labelled ticket (nothing measured: a gate must not read it as 0 or 1)."""
        return self.correct / self.labelled if self.labelled else None


def accuracy(pairs: Iterable[tuple[str | None, str | None]]) -> Accuracy:
    """Accuracy over (reviewed label, predicted label) pairs; pairs without a reviewed label are not in the sample,
    and an unparsed prediction (None) counts as wrong."""
    labelled = correct = 0
    for expected, predicted in pairs:
        if expected is None:
            continue
        labelled += 1
        correct += predicted == expected
    return Accuracy(labelled, correct)
