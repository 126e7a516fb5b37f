"""The LSA embedder: learning, inference contract, deterministic serialisation and corruption handling."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import pytest

from runtime_ops.embedders.lsa import Embedder, EmbedderParams, digest, train_embedder
from runtime_ops.models.golden import GoldenQuestion
from runtime_ops.models.metrics import evaluate_embedder, rank_documents

CORPUS: dict[str, str] = {
    "baking-01": "Knead the bread dough for ten minutes until it is smooth and elastic.",
    "baking-02": "Let the dough rise in a warm place until it doubles, about one hour, before baking.",
    "baking-03": "Preheat the oven to 220 degrees and bake the loaf until the crust is golden brown.",
    "baking-04": "Sourdough bread uses a starter of wild yeast and flour instead of dried yeast.",
    "baking-05": "Whisk butter and sugar until pale, then fold in flour for a light sponge cake.",
    "baking-06": "A pinch of salt in the dough strengthens gluten and improves the flavour of bread.",
    "baking-07": "Brush the pastry with beaten egg so the crust bakes shiny in the hot oven.",
    "baking-08": "Yeast feeds on sugar and releases gas that makes the dough rise.",
    "baking-09": "Cool the cake on a wire rack before icing it with cream and sugar.",
    "baking-10": "Rye flour makes a dense dark bread with a sour flavour and a thick crust.",
    "astro-01": "The telescope observed a distant galaxy whose light left it billions of years ago.",
    "astro-02": "Jupiter is the largest planet and its moons orbit it like a small solar system.",
    "astro-03": "A supernova is the explosion of a massive star at the end of its life.",
    "astro-04": "The planet Mars has a thin atmosphere and red dust storms across its surface.",
    "astro-05": "Astronomers measure the distance to nearby stars using parallax as the earth orbits the sun.",
    "astro-06": "A black hole bends light so strongly that nothing escapes past its event horizon.",
    "astro-07": "The moon orbits the earth every twenty seven days and shows phases from the sun.",
    "astro-08": "Comets are icy bodies whose tails glow and point away from the sun.",
    "astro-09": "Radio telescopes detect faint signals from galaxies and gas clouds between the stars.",
    "astro-10": "Saturn is a gas giant planet famous for its bright rings of ice and rock.",
    "network-01": "A router forwards packets between networks using a routing table of ip addresses.",
    "network-02": "TCP retransmits lost packets and uses acknowledgements to guarantee delivery.",
    "network-03": "DNS resolves a domain name to an ip address before the browser opens a connection.",
    "network-04": "A firewall filters network traffic by port and protocol to block attacks.",
    "network-05": "TLS encrypts the connection between client and server with certificates.",
    "network-06": "UDP sends packets without acknowledgements, which suits video streaming.",
    "network-07": "A switch learns mac addresses and forwards frames on the local network.",
    "network-08": "Latency is the delay for packets to cross the network from client to server.",
    "network-09": "A load balancer spreads connections from clients across many servers.",
    "network-10": "DHCP hands out ip addresses to devices when they join the network.",
}
KEYS = list(CORPUS)
TEXTS = list(CORPUS.values())


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return train_embedder(TEXTS, EmbedderParams(dim=8, seed=0))


def test_params_to_dict_and_validation() -> None:
    assert EmbedderParams().to_dict() == {"dim": 128, "max_features": 50000, "ngram_max": 2, "seed": 0}
    assert EmbedderParams.from_dict({"dim": 4}) == EmbedderParams(dim=4)
    with pytest.raises(ValueError, match="dim"):
        EmbedderParams(dim=0)
    with pytest.raises(ValueError, match="unknown"):
        EmbedderParams.from_dict({"dims": 4})


@pytest.mark.parametrize("texts", [[], ["only one"], ["one text", "", "   "]])
def test_training_needs_two_non_empty_texts(texts: list[str]) -> None:
    with pytest.raises(ValueError, match="at least 2 non-empty texts"):
        train_embedder(texts)


def test_embed_shape_dtype_and_unit_rows(embedder: Embedder) -> None:
    vectors = embedder.embed(["bread dough rises", "the galaxy and its stars", "packets on the network"])
    assert vectors.shape == (3, embedder.dim) == (3, 8)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_unknown_text_embeds_as_zero_vector(embedder: Embedder) -> None:
    vectors = embedder.embed(["zzzz qqqq", "", "bread"])
    assert not vectors[0].any()
    assert not vectors[1].any()
    assert np.linalg.norm(vectors[2]) == pytest.approx(1.0, rel=1e-5)


def test_embed_of_empty_list_and_batching(embedder: Embedder) -> None:
    assert embedder.embed([]).shape == (0, 8)
    whole = embedder.embed(TEXTS)
    batched = embedder.embed(TEXTS, batch_size=7)
    np.testing.assert_array_equal(whole, batched)
    with pytest.raises(TypeError):
        embedder.embed("a single string")  # type: ignore[arg-type]


def test_dim_is_clipped_to_what_the_corpus_supports() -> None:
    model = train_embedder(["red apples and green pears", "fast cars on a long road"], EmbedderParams(dim=128))
    assert 1 <= model.dim <= 2
    assert model.params.dim == 128  # the requested value is kept for the record
    assert model.embed(["apples"]).shape == (1, model.dim)


def test_training_twice_gives_byte_identical_models() -> None:
    first = train_embedder(TEXTS, EmbedderParams(dim=8, seed=3)).to_bytes()
    second = train_embedder(TEXTS, EmbedderParams(dim=8, seed=3)).to_bytes()
    assert first == second
    assert digest(first) == digest(second) == hashlib.sha256(first).hexdigest()
    other = train_embedder(TEXTS, EmbedderParams(dim=6, seed=3)).to_bytes()
    assert digest(other) != digest(first)


def test_round_trip_preserves_inference_and_bytes(embedder: Embedder) -> None:
    data = embedder.to_bytes()
    loaded = Embedder.from_bytes(data)
    assert loaded.dim == embedder.dim
    assert loaded.params == embedder.params
    probe = ["how long should dough rise", "rings of saturn", "ip address of a router", "nothing known"]
    np.testing.assert_allclose(loaded.embed(probe), embedder.embed(probe), atol=1e-6)
    assert loaded.to_bytes() == data


def test_serialisation_is_not_pickle(embedder: Embedder) -> None:
    data = embedder.to_bytes()
    assert data.startswith(b"RTOPSEMB")
    assert b'"vocabulary"' in data  # header is readable JSON


@pytest.mark.parametrize(
    "mangle",
    [
        pytest.param(lambda d: b"", id="empty"),
        pytest.param(lambda d: b"definitely not a model", id="garbage"),
        pytest.param(lambda d: d[:60], id="truncated-header"),
        pytest.param(lambda d: d[:-1], id="truncated-tail"),
        pytest.param(lambda d: d + b"\x00", id="trailing-byte"),
        pytest.param(
            lambda d: d[: len(d) // 2] + bytes([d[len(d) // 2] ^ 0xFF]) + d[len(d) // 2 + 1 :], id="flipped-byte"
        ),
        pytest.param(lambda d: b"XXXXXXXX" + d[8:], id="bad-magic"),
    ],
)
def test_from_bytes_rejects_damaged_data(embedder: Embedder, mangle: Callable[[bytes], bytes]) -> None:
    with pytest.raises(ValueError, match=r"embedder model|too short|magic"):
        Embedder.from_bytes(mangle(embedder.to_bytes()))


def test_on_topic_documents_rank_above_off_topic(embedder: Embedder) -> None:
    queries = {
        "baking": "how long does bread dough need to rise before it goes in the oven",
        "astro": "which planet has rings and moons in orbit",
        "network": "how does a router forward packets to an ip address",
    }
    chunk_vecs = embedder.embed(TEXTS)
    query_vecs = embedder.embed(list(queries.values()))
    scores = query_vecs @ chunk_vecs.T
    ranked = rank_documents(query_vecs, chunk_vecs, KEYS, top_k=5)
    for row, topic in enumerate(queries):
        on_topic = np.array([key.startswith(topic) for key in KEYS])
        # The bulk of the topic sits above the bulk of everything else ...
        assert scores[row, on_topic].mean() > scores[row, ~on_topic].mean() + 0.15
        # ... and the top of the ranking is on-topic.
        assert all(key.startswith(topic) for key in ranked[row]), ranked[row]


def test_recall_well_above_random_on_golden_questions(embedder: Embedder) -> None:
    questions = [
        GoldenQuestion("q1", "how long should I knead bread dough", ("baking-01",)),
        GoldenQuestion("q2", "what temperature to preheat the oven for a golden loaf", ("baking-03",)),
        GoldenQuestion("q3", "what is a sourdough starter made of", ("baking-04",)),
        GoldenQuestion("q4", "what happens when a massive star explodes", ("astro-03",)),
        GoldenQuestion("q5", "does mars have dust storms", ("astro-04",)),
        GoldenQuestion("q6", "why do comet tails point away from the sun", ("astro-08",)),
        GoldenQuestion("q7", "how does DNS turn a domain name into an address", ("network-03",)),
        GoldenQuestion("q8", "what does a firewall block", ("network-04",)),
        GoldenQuestion("q9", "how does TLS encrypt a connection", ("network-05",)),
    ]
    metrics = evaluate_embedder(embedder, TEXTS, KEYS, questions, ks=(1, 5, 10))
    random_recall_at_5 = 5 / len(KEYS)
    assert metrics["questions"] == 9.0
    assert metrics["recall@5"] >= 0.6 > 3 * random_recall_at_5
    assert metrics["mrr"] >= 0.6
