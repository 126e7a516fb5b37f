"""A team's own documents: a deterministic synthetic corpus that shares no vocabulary with the demo.

Each document is a markdown page about one invented product: a heading naming it, then paragraphs whose
sentences mix the document's own topic terms with filler every document shares, so retrieval has real work
to do (filler dominates) but a question drawn from a document can be answered.
"""

from __future__ import annotations

import random
from pathlib import Path

_SYLLABLES = ["ka", "zu", "mo", "ri", "te", "vo", "lan", "qui", "so", "ne", "dra", "pel", "xi", "bor", "fa", "gu"]
_FILLER = tuple(
    [
        "the",
        "team",
        "noted",
        "that",
        "this",
        "unit",
        "keeps",
        "working",
        "during",
        "the",
        "quarterly",
        "review",
        "and",
        "every",
        "operator",
        "agreed",
        "with",
        "the",
        "plan",
        "after",
        "some",
        "discussion",
        "about",
        "schedules",
        "budgets",
        "and",
        "the",
        "usual",
        "maintenance",
        "window",
    ]
)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))


def _sentence(rng: random.Random, topic: list[str], shared: list[str]) -> str:
    words = [rng.choice(_FILLER) for _ in range(rng.randint(8, 14))]
    for _ in range(rng.randint(3, 5)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(topic))
    words.insert(rng.randrange(len(words) + 1), rng.choice(shared))
    return " ".join(words).capitalize() + "."


def write_own_corpus(folder: Path, n_docs: int, *, seed: int = 7, start: int = 0, prefix: str = "acme") -> list[Path]:
    """Write documents `start .. start+n_docs-1` under `folder/<prefix>/`; returns their paths."""
    vocab_rng = random.Random(seed)
    shared = [_word(vocab_rng) for _ in range(40)]  # terms several products share (hard negatives)
    paths = []
    for i in range(start, start + n_docs):
        rng = random.Random(f"{seed}:{i}")
        topic = [_word(rng) for _ in range(12)]
        name = f"{topic[0].capitalize()} {topic[1].capitalize()}"
        paragraphs = [
            " ".join(_sentence(rng, topic, shared) for _ in range(rng.randint(3, 5))) for _ in range(rng.randint(2, 4))
        ]
        body = f"# {name} operations guide\n\n" + "\n\n".join(paragraphs) + "\n"
        path = folder / prefix / f"product-{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        paths.append(path)
    return paths


def declare_pipeline(root: Path, name: str, landing: Path, extra: str = "") -> Path:
    """A defs.yaml for a pipeline of the team's own (no golden set of its own: the default one fits nothing)."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "defs.yaml"
    path.write_text(
        "type: runtime_ops.components.RetrievalPipeline\n"
        "attributes:\n"
        f"  name: {name}\n"
        f"  landing: {{uri: '{landing}'}}\n" + extra
    )
    return path
