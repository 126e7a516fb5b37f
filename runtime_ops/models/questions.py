"""Evaluation questions generated from a team's own corpus, for corpora without a labelled golden set.

Deterministic and offline: the same chunks and seed give the same questions in the same order, in
whatever order the chunks arrive. Two methods, each yielding at most one question per chunk:

- ``inverse_cloze``: the chunk's most salient prose sentence (most distinct content words, with
  extra weight for specific tokens: numbers, identifiers, mid-sentence capitalised names) becomes
  the query, reduced to its content words (stopwords removed) with a further fixed fraction of
  them (``drop_fraction``, at least 3 kept) removed at seeded-random positions. The corpus cannot
  be altered, so the sentence stays in the relevant document; dropping words keeps the query from
  being a verbatim substring of it, which would make every lexical model look perfect.
- ``heading``: a Markdown heading of the chunk (outside code fences) with at least two content
  words, the one with the most content words. Headings are how people name what they look for.

Both are easier than real users' questions (the query's words are in the relevant document), so
generated questions are for comparing models with each other, not for judging absolute quality;
`provenance_mix` lets a report say how much of its question set is generated.

Selection is by a hash of (seed, normalised question text), never by position: each candidate
question gets a 128-bit key and the `n` smallest keys win, which needs only a bounded heap over
the chunk iterator (chunk texts are not kept). Adding documents therefore only displaces the
questions whose keys the new ones undercut. The same question text from two documents (a shared
heading such as "Getting started", a chunk copied between documents) is ambiguous — it has more
than one right answer — and is dropped; the same text from two chunks of one document is kept once.
Relevance is the source document, ``relevant = (doc_key,)``.

A question must read as words (`reads_as_words`): a sentence or heading that is mostly numbers, punctuation and
short tokens (a table of values, a list of hex codes) is passed over for the chunk's next best one, so no
generated question is gibberish like "stdev 1.5 2.5 2.75 4.75 1.0810874155219827".
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from runtime_ops.models.golden import GoldenQuestion

__all__ = [
    "METHODS",
    "GeneratedQuestion",
    "combine",
    "generate_questions",
    "provenance_mix",
    "question_set_version",
    "reads_as_words",
    "split_holdout",
]

METHODS = ("inverse_cloze", "heading")
REVIEWED = "reviewed"
# Groups kept beyond `n` so that ambiguous questions (dropped at the end) rarely leave fewer than n.
_HEAP_SLACK = 16
_MIN_SENTENCE_WORDS, _MAX_SENTENCE_WORDS = 6, 40
_MIN_CLOZE_CONTENT_WORDS = 4
_MIN_KEPT_WORDS = 3
_MAX_HEADING_WORDS = 15
# What "reads as words" means: at least 2 words (tokens of 3+ letters, letters the majority of their characters)
# and letters at least 55% of the non-space characters. On the demo corpus this drops value lists ("list 1 3 5 7
# 0 2 4 8 10 15", "x00 x01 x02 ...", "prec 28 Emin 425000000 Emax") and keeps signatures such as
# "random.gauss(mu=0.0, sigma=1.0)" (60% letters).
_MIN_QUESTION_WORDS = 2
_MIN_LETTER_SHARE = 0.55

_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each either else etc every few
    for from further had has have having he her here hers herself him himself his how however i if in
    into is it its itself just let may me might more most must my myself no nor not now of off on once
    only or other our ours ourselves out over own same shall she should so some such than that the
    their theirs them themselves then there these they this those through thus to too under until up
    upon us use used using very via was we were what when where whether which while who whom whose why
    will with within without would yet you your yours yourself yourselves
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+>]|\d+[.)])\s+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
# Emphasis markers only at word edges, so identifiers such as capture_output keep their underscores.
_EMPHASIS = re.compile(r"`+|~~|(?<![A-Za-z0-9])[*_]+|[*_]+(?![A-Za-z0-9])")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TOKEN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_'./+-]*[A-Za-z0-9])?")
_NORMALISE = re.compile(r"[^0-9a-z]+")


@dataclass(frozen=True)
class GeneratedQuestion(GoldenQuestion):
    """A golden question plus where it came from.

    Generated: ``{"method", "chunk_id", "doc_key", "chunk_sha256"}`` (a 16-hex-digit prefix of the
    source chunk text's sha256); reviewed (hand-written) questions: ``{"method": "reviewed"}``.
    """

    provenance: dict[str, str | int] = field(default_factory=dict, hash=False)


@dataclass
class _Group:
    """All chunks that produced one normalised question text (bounded: at most two documents)."""

    source: tuple[str, str, int]  # (method, chunk digest, chunk id): the smallest one wins
    question: str
    doc_key: str
    ambiguous: bool = False


def generate_questions(
    chunks: Iterable[tuple[int, str, str]],
    *,
    n: int,
    seed: int = 0,
    min_chunk_chars: int = 200,
    methods: Sequence[str] = METHODS,
    drop_fraction: float = 0.25,
) -> list[GeneratedQuestion]:
    """Up to `n` questions from `(chunk_id, doc_key, text)` triples, in key order (see the module doc).

    Chunks shorter than `min_chunk_chars` (after stripping) or without a usable sentence/heading are
    skipped. Fewer than `n` questions come back when the corpus has fewer usable, unambiguous ones,
    or (rarely) when more than `n + 16` of the `2n + 16` smallest keys kept are ambiguous.
    Question ids are ``gen-<method>-<chunk sha256 prefix>``: stable for a chunk text and method.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"methods must be a non-empty subset of {METHODS}, got {list(methods)}")
    if not 0 <= drop_fraction < 1:
        raise ValueError(f"drop_fraction must be in [0, 1), got {drop_fraction!r}")
    capacity = 2 * n + _HEAP_SLACK
    heap: list[int] = []  # negated keys: heap[0] is minus the largest key kept
    groups: dict[int, _Group] = {}
    for chunk_id, doc_key, text in chunks:
        if len(text.strip()) < min_chunk_chars:
            continue
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        headings, sentences = _parse(text)
        for method in methods:
            if method == "inverse_cloze":
                question = _cloze_query(sentences, seed, drop_fraction)
            else:
                question = _heading_query(headings)
            if question is None or not reads_as_words(question):
                continue
            key = _key(seed, _normalise(question))
            source = (method, digest, chunk_id)
            group = groups.get(key)
            if group is not None:
                if group.doc_key != doc_key:
                    group.ambiguous = True  # a second document: no longer a single right answer
                elif source < group.source:
                    group.source, group.question = source, question
                continue
            if len(heap) >= capacity:
                if key > -heap[0]:
                    continue  # larger than every kept key; so will be any later duplicate of it
                del groups[-heapq.heappushpop(heap, -key)]
            else:
                heapq.heappush(heap, -key)
            groups[key] = _Group(source, question, doc_key)

    questions: list[GeneratedQuestion] = []
    for key in sorted(groups):
        group = groups[key]
        if group.ambiguous:
            continue
        method, digest, chunk_id = group.source
        prefix = digest[:16]
        provenance: dict[str, str | int] = {
            "method": method,
            "chunk_id": chunk_id,
            "doc_key": group.doc_key,
            "chunk_sha256": prefix,
        }
        questions.append(GeneratedQuestion(f"gen-{method}-{prefix}", group.question, (group.doc_key,), provenance))
        if len(questions) == n:
            break
    return questions


def _parse(text: str) -> tuple[list[str], list[str]]:
    """Markdown headings and prose sentences of a chunk, ignoring fenced code and table rows."""
    headings: list[str] = []
    paragraphs: list[list[str]] = [[]]
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            paragraphs.append([])
            continue
        if in_fence:
            continue
        heading = _HEADING.match(line)
        if heading:
            headings.append(_clean(heading.group(1)))
            paragraphs.append([])
        elif not line.strip() or line.lstrip().startswith("|"):
            paragraphs.append([])
        else:
            paragraphs[-1].append(_LIST_MARKER.sub("", line).strip())
    sentences: list[str] = []
    for paragraph in paragraphs:
        joined = _clean(" ".join(paragraph))
        sentences.extend(s for s in _SENTENCE_END.split(joined) if s)
    return headings, sentences


def _clean(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    text = _EMPHASIS.sub("", text)
    return " ".join(text.split())


def _content_words(tokens: Sequence[str]) -> list[str]:
    """Tokens that are not stopwords and carry a letter-run of 3+ or a digit, de-duplicated (case-insensitive)."""
    seen: set[str] = set()
    words: list[str] = []
    for token in tokens:
        lower = token.lower()
        if lower in _STOPWORDS or lower in seen or (len(lower) < 3 and not any(c.isdigit() for c in lower)):
            continue
        seen.add(lower)
        words.append(token)
    return words


def _salience(tokens: Sequence[str], content: Sequence[str]) -> int:
    specific = {
        t.lower()
        for i, t in enumerate(tokens)
        if t in content
        and (any(c.isdigit() or c in "_./" for c in t) or (i > 0 and t[0].isupper()) or "-" in t.strip("-"))
    }
    return len(content) + 2 * len(specific)


def _cloze_query(sentences: Sequence[str], seed: int, drop_fraction: float) -> str | None:
    best: tuple[int, list[str], str] | None = None
    for sentence in sentences:
        tokens = _TOKEN.findall(sentence)
        if not _MIN_SENTENCE_WORDS <= len(tokens) <= _MAX_SENTENCE_WORDS:
            continue
        content = _content_words(tokens)
        if len(content) < _MIN_CLOZE_CONTENT_WORDS or not reads_as_words(" ".join(content)):
            continue
        score = _salience(tokens, content)
        if best is None or score > best[0]:  # ties: the first such sentence
            best = (score, content, sentence)
    if best is None:
        return None
    _, content, sentence = best
    drop = min(int(drop_fraction * len(content)), len(content) - _MIN_KEPT_WORDS)
    if drop > 0:
        # Drop the words whose seeded hash is smallest: which ones depends on (seed, sentence) only.
        ranked = sorted(range(len(content)), key=lambda i: _key(seed, f"{sentence}\0{i}"))
        dropped = set(ranked[:drop])
        content = [word for i, word in enumerate(content) if i not in dropped]
    return " ".join(content)


def _heading_query(headings: Sequence[str]) -> str | None:
    best: tuple[int, str] | None = None
    for heading in headings:
        tokens = _TOKEN.findall(heading)
        if len(tokens) > _MAX_HEADING_WORDS:
            continue
        content = len(_content_words(tokens))
        if content >= 2 and reads_as_words(heading) and (best is None or content > best[0]):
            best = (content, heading)
    return None if best is None else best[1]


def reads_as_words(text: str) -> bool:
    """Whether `text` reads as words rather than numbers, punctuation and units: at least 2 words (3+ letters,
    letters the majority of the token) and letters at least 55% of its non-space characters."""
    words = sum(
        1
        for token in _TOKEN.findall(text)
        if (letters := sum(c.isalpha() for c in token)) >= 3 and 2 * letters > len(token)
    )
    characters = sum(not c.isspace() for c in text)
    letters = sum(c.isalpha() for c in text)
    return words >= _MIN_QUESTION_WORDS and letters >= _MIN_LETTER_SHARE * characters


def _normalise(question: str) -> str:
    return _NORMALISE.sub(" ", question.lower()).strip()


def _key(seed: int, text: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}\0{text}".encode()).digest()[:16], "big")


Q = TypeVar("Q", bound=GoldenQuestion)


def split_holdout(questions: Sequence[Q], fraction: float = 0.5, seed: int = 0) -> tuple[list[Q], list[Q]]:
    """(train, holdout) by a hash of (seed, question id), each in input order.

    A question's side depends only on its id and the seed, so it stays put when the set grows or
    shrinks; `fraction` is the expected share of the holdout.
    """
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")
    train: list[Q] = []
    holdout: list[Q] = []
    for question in questions:
        position = _key(seed, f"holdout\0{question.id}") / 2**128
        (holdout if position < fraction else train).append(question)
    return train, holdout


def question_set_version(questions: Iterable[GoldenQuestion]) -> str:
    """sha256 over the sorted (id, question, relevant) triples: names the exact set a report used.

    Independent of order and provenance; duplicate ids are refused (a set's ids must be unique).
    """
    rows = sorted((q.id, q.question, list(q.relevant)) for q in questions)
    ids = [row[0] for row in rows]
    duplicates = sorted({i for i, j in itertools.pairwise(ids) if i == j})
    if duplicates:
        raise ValueError(f"duplicate question ids: {', '.join(duplicates)}")
    canonical = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def provenance_mix(questions: Iterable[GoldenQuestion]) -> dict[str, int]:
    """Question counts by method, sorted by method; questions without provenance count as reviewed."""
    counts = Counter(_method(q) for q in questions)
    return dict(sorted(counts.items()))


def _method(question: GoldenQuestion) -> str:
    provenance = question.provenance if isinstance(question, GeneratedQuestion) else {}
    return str(provenance.get("method", REVIEWED))


def combine(
    reviewed: Sequence[GoldenQuestion],
    generated: Iterable[GeneratedQuestion],
    min_questions: int,
) -> list[GeneratedQuestion]:
    """Reviewed questions first, topped up with generated ones only up to `min_questions` in total.

    Reviewed questions are all kept (tagged ``{"method": "reviewed"}`` unless they carry provenance);
    a generated question is skipped when its id or its normalised text is already in the set.
    """
    if isinstance(min_questions, bool) or not isinstance(min_questions, int) or min_questions < 0:
        raise ValueError(f"min_questions must be an integer >= 0, got {min_questions!r}")
    combined = [
        q
        if isinstance(q, GeneratedQuestion) and q.provenance
        else GeneratedQuestion(q.id, q.question, q.relevant, {"method": REVIEWED})
        for q in reviewed
    ]
    ids = {q.id for q in combined}
    texts = {_normalise(q.question) for q in combined}
    for question in generated:
        if len(combined) >= min_questions:
            break
        text = _normalise(question.question)
        if question.id in ids or text in texts:
            continue
        combined.append(question)
        ids.add(question.id)
        texts.add(text)
    return combined
