"""Request ids (issued time encoded, ordered, refused when malformed) and what the query log keeps instead of a
query or a session (the normalised query's SHA-256, the session's HMAC under a key derived from the link secret)."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta

import pytest

from runtime_ops.online.hashing import normalise_query, query_hash, session_hash, session_key
from runtime_ops.online.request_ids import LENGTH, is_request_id, issued_at, new_request_id


def test_a_request_id_carries_the_millisecond_it_was_issued() -> None:
    when = datetime(2026, 12, 5, 3, 30, 1, 123_000, tzinfo=UTC)
    rid = new_request_id(when)
    assert rid.startswith("q_") and len(rid) == LENGTH == 28 and is_request_id(rid)
    assert issued_at(rid) == when
    assert new_request_id(when) != rid  # 80 random bits after the time


def test_request_ids_sort_by_time() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [new_request_id(start + timedelta(milliseconds=ms)) for ms in (0, 1, 999, 60_000, 86_400_000 * 400)]
    assert sorted(ids) == ids
    assert [issued_at(i) for i in ids] == [
        start + timedelta(milliseconds=ms) for ms in (0, 1, 999, 60_000, 86_400_000 * 400)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "q_",
        "q_" + "0" * 25,
        "q_" + "0" * 27,
        "x_" + "0" * 26,
        "q_" + "I" * 26,
        "q_" + "0" * 25 + "u",
        "Q_" + "0" * 26,
    ],
)
def test_anything_else_is_not_a_request_id(text: str) -> None:
    assert not is_request_id(text)
    with pytest.raises(ValueError, match="not a request id"):
        issued_at(text)


def test_equal_queries_hash_alike_after_normalisation() -> None:
    assert normalise_query("  How do I\tEXPORT\u00a0the  tracker? ") == "how do i export the tracker?"
    assert query_hash("How do I export?") == query_hash("how  do i EXPORT?")
    assert query_hash("How do I export?") == hashlib.sha256(b"how do i export?").hexdigest()
    assert query_hash("export") != query_hash("import")


def test_a_session_is_kept_as_a_keyed_hash_only() -> None:
    key = session_key("link-secret")
    digest = session_hash(key, "user-42")
    assert len(digest) == 64 and "user-42" not in digest
    assert digest == hmac.new(key, b"user-42", hashlib.sha256).hexdigest()
    # Not a plain hash, and not the link secret used as is: someone without the secret cannot test a guess.
    assert digest != hashlib.sha256(b"user-42").hexdigest()
    assert digest != hmac.new(b"link-secret", b"user-42", hashlib.sha256).hexdigest()
    assert session_hash(session_key("another secret"), "user-42") != digest
    assert session_hash(key, "user-43") != digest
