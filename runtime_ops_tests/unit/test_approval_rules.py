from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runtime_ops.approvals import links
from runtime_ops.policies.approvals import RequestPolicy, authorise, tally
from runtime_ops.store import chain as audit

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


def _chain(n: int, chain: str = "apr-1", start_id: int = 1) -> list[dict[str, Any]]:
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
        rec["hash"] = audit.record_hash(prev, rec)
        prev = rec["hash"]
        records.append(rec)
    return records


def test_audit_chains_detect_edit_delete_and_truncation() -> None:
    a, b = _chain(5, "apr-1", 1), _chain(3, "apr-2", 100)
    interleaved = sorted(a + b, key=lambda r: (r["seq"], r["id"]))
    heads = {"apr-1": (5, a[-1]["hash"]), "apr-2": (3, b[-1]["hash"])}
    assert audit.verify(interleaved, heads=heads).ok
    edited = [dict(r) for r in a]
    edited[2]["actor"] = "mallory"
    report = audit.verify(edited)
    assert not report.ok and report.first_broken_id == 3 and report.problem is not None and "modified" in report.problem
    deleted = a[:2] + a[3:]
    assert audit.verify(deleted).first_broken_id == 4
    truncated = audit.verify(a[:4], heads={"apr-1": (5, a[-1]["hash"])})
    assert not truncated.ok and truncated.problem is not None and "removed" in truncated.problem
    moved = [dict(r) for r in a]
    moved[1]["chain"] = "apr-2"  # a record moved to another request's chain
    assert not audit.verify(moved).ok


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
