from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runtime_ops.approvals import links
from runtime_ops.policies.approvals import RequestPolicy, authorise, tally
from runtime_ops.store.approvals import chain as audit

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _request(**kw: object) -> dict[str, object]:
    base = {
        "id": "apr-1",
        "approvers": ["U1", "U2", "U3"],
        "escalation_approvers": ["U9"],
        "requested_by": "U1",
        "expire_at": NOW + timedelta(hours=1),
        "escalated_at": None,
    }
    return {**base, **kw}


def test_authorise_rules() -> None:
    req = _request()
    assert authorise(req, "U2", False, NOW) is None
    assert authorise(req, "U7", False, NOW).outcome == "unauthorised"
    assert authorise(req, "U1", False, NOW).outcome == "self_approval"
    assert authorise(req, "U2", True, NOW).outcome == "duplicate_vote"
    assert authorise(req, "U2", False, NOW + timedelta(hours=2)).outcome == "expired"
    refusal = authorise(req, "U9", False, NOW)
    assert refusal.outcome == "unauthorised" and "escalation" in refusal.message
    assert authorise(_request(escalated_at=NOW), "U9", False, NOW) is None
    assert authorise(_request(approvers=[]), "anyone", False, NOW) is None  # embedded mode


def test_tally_m_of_n_and_single_reject() -> None:
    assert tally(1, 0, 2) == "pending"
    assert tally(2, 0, 2) == "approved"
    assert tally(1, 1, 2) == "rejected"


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="only 2 approvers"):
        RequestPolicy(approvers=("a", "b"), required_approvals=3)
    p = RequestPolicy(escalate_after=timedelta(hours=1), expire_after=timedelta(hours=2))
    assert p.deadlines(NOW) == (NOW + timedelta(hours=1), NOW + timedelta(hours=2))


KEY = b"the audit key, kept outside the database"


def _chain(n: int, chain: str = "apr-1", start_id: int = 1, key: bytes = KEY) -> list[dict[str, Any]]:
    records, prev = [], audit.GENESIS
    for i in range(1, n + 1):
        rec = {
            "id": start_id + i - 1,
            "chain": chain,
            "seq": i,
            "at": NOW,
            "request_id": chain,
            "event": "attempt",
            "actor": f"U{i}",
            "channel": "slack",
            "outcome": "accepted",
            "detail": {"n": i},
            "prev_hash": prev,
        }
        rec["hash"] = audit.record_hash(prev, rec, key)
        prev = rec["hash"]
        records.append(rec)
    return records


def _anchor(heads: dict[str, tuple[int, str]], at: str = "2026-11-29T12:00:00+00:00", key: bytes = KEY) -> audit.Anchor:
    return audit.Anchor(at, heads, audit.anchor_mac(heads, at, key))


def test_audit_chains_detect_edit_delete_and_truncation() -> None:
    a, b = _chain(5, "apr-1", 1), _chain(3, "apr-2", 100)
    interleaved = sorted(a + b, key=lambda r: (r["seq"], r["id"]))
    heads = {"apr-1": (5, a[-1]["hash"]), "apr-2": (3, b[-1]["hash"])}
    assert audit.verify(interleaved, KEY, heads=heads).ok
    edited = [dict(r) for r in a]
    edited[2]["actor"] = "mallory"
    report = audit.verify(edited, KEY)
    assert not report.ok and report.first_broken_id == 3 and report.problem is not None and "modified" in report.problem
    deleted = a[:2] + a[3:]
    report = audit.verify(deleted, KEY)
    assert report.first_broken_id == 4 and "deleted" in str(report.problem)
    inserted = [*a[:2], {**a[2], "id": 99, "seq": 3}, *a[2:]]
    report = audit.verify(inserted, KEY)
    assert not report.ok and "inserted" in str(report.problem)
    truncated = audit.verify(a[:4], KEY, heads={"apr-1": (5, a[-1]["hash"])})
    assert not truncated.ok and truncated.problem is not None and "removed" in truncated.problem
    moved = [dict(r) for r in a]
    moved[1]["chain"] = "apr-2"  # a record moved to another request's chain
    assert not audit.verify(moved, KEY).ok


def test_a_chain_rewritten_without_the_key_fails_and_anchors_catch_a_head_moved_back() -> None:
    a = _chain(5)
    # Someone with write access to the database but not the key re-chains an edited log, heads and all.
    forged = _chain(5, key=b"a guess")
    forged[2]["actor"] = "mallory"
    report = audit.verify(forged, KEY, heads={"apr-1": (5, forged[-1]["hash"])})
    assert not report.ok and report.first_broken_id == 1 and "forged" in str(report.problem)
    # The last two records deleted and the head moved back with them: the log alone is consistent...
    assert audit.verify(a[:3], KEY, heads={"apr-1": (3, a[2]["hash"])}).ok
    # ...but an anchor taken when the chain ended at #5 names the truncation.
    anchored = [_anchor({"apr-1": (5, a[-1]["hash"])})]
    report = audit.verify(a[:3], KEY, heads={"apr-1": (3, a[2]["hash"])}, anchors=anchored)
    assert not report.ok and "truncated" in str(report.problem) and "#5" in str(report.problem)
    assert audit.verify(a, KEY, heads={"apr-1": (5, a[-1]["hash"])}, anchors=anchored).ok
    # An anchored record rewritten (with the key, even) differs from its anchor; an altered anchor is refused.
    rewritten = _chain(5)
    rewritten[4] = {**rewritten[4], "actor": "U5-again"}
    rewritten[4]["hash"] = audit.record_hash(rewritten[3]["hash"], rewritten[4], KEY)
    report = audit.verify(rewritten, KEY, anchors=anchored)
    assert not report.ok and "differs from its anchor" in str(report.problem)
    altered = audit.Anchor(anchored[0].at, {"apr-1": (4, a[3]["hash"])}, anchored[0].mac)
    assert "anchor" in str(audit.verify(a, KEY, anchors=[altered]).problem)


def test_a_wrong_key_is_told_from_a_forgery_by_key_id() -> None:
    other = b"not the log's key"
    ours, theirs = audit.key_id(KEY), audit.key_id(other)
    a = [{**r, "key_id": ours} for r in _chain(3)]
    # Every record names the key that MACed it: under another key the first one says so, with both key ids.
    report = audit.verify(a, other)
    assert not report.ok and report.wrong_key and report.first_broken_id == 1
    assert f"key id {theirs}" in str(report.problem) and f"key id {ours}" in str(report.problem)
    assert "record 1 (#1 of chain apr-1)" in str(report.problem) and "forged" not in str(report.problem)
    # So does the newest anchor, before any record is read; an older anchor of a rotated-out key does not count.
    old = audit.Anchor(
        "2026-11-28T12:00:00+00:00", {}, audit.anchor_mac({}, "2026-11-28T12:00:00+00:00", other), theirs
    )
    new = _anchor({"apr-1": (3, a[-1]["hash"])})
    new = audit.Anchor(new.at, new.heads, new.mac, ours)
    report = audit.verify(a, other, anchors=[new, old])
    assert report.wrong_key and "the newest anchor (of 2026-11-29T12:00:00+00:00)" in str(report.problem)
    assert audit.verify(a, KEY, heads={"apr-1": (3, a[-1]["hash"])}, anchors=[old, new]).ok
    # A record re-MACed by someone without the key keeps naming our key: that is a forgery, not a wrong key.
    forged = [dict(r) for r in a]
    forged[1]["actor"] = "mallory"
    report = audit.verify(forged, KEY)
    assert not report.ok and not report.wrong_key and "forged" in str(report.problem)
    # Records written before key ids (no key_id) are judged by their MAC alone.
    assert not audit.verify(_chain(3), other).wrong_key


def test_links_bind_claims_and_refuse_tampering_and_expiry() -> None:
    token = links.issue(
        "s3cret", request_id="apr-1", approver="U2", digest="d" * 64, expires_at=NOW + timedelta(hours=1)
    )
    claims = links.read("s3cret", token, NOW)
    assert (claims.request_id, claims.approver, claims.digest) == ("apr-1", "U2", "d" * 64)
    with pytest.raises(links.LinkError) as exc:
        links.read("s3cret", token[:-2] + ("AA" if not token.endswith("AA") else "BB"), NOW)
    assert exc.value.kind == "tampered"
    with pytest.raises(links.LinkError) as exc:
        links.read("other-secret", token, NOW)
    assert exc.value.kind == "tampered"
    with pytest.raises(links.LinkError) as exc:
        links.read("s3cret", token, NOW + timedelta(hours=2))
    assert exc.value.kind == "expired"
