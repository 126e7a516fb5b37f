"""The audit chain: each record's hash covers its content and the previous record's hash.

Editing, deleting or reordering any record breaks every hash after it; `verify` names the first broken one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

GENESIS = "0" * 64
FIELDS = ("id", "at", "request_id", "event", "actor", "channel", "outcome", "detail")


def canonical(record: Mapping[str, Any]) -> str:
    def norm(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.astimezone(UTC).isoformat()
        return value

    return json.dumps({f: norm(record.get(f)) for f in FIELDS}, sort_keys=True, separators=(",", ":"), default=str)


def record_hash(prev_hash: str, record: Mapping[str, Any]) -> str:
    return hashlib.sha256(f"{prev_hash}\n{canonical(record)}".encode()).hexdigest()


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    records: int
    first_broken_id: int | None = None
    problem: str | None = None


def verify(records: Iterable[Mapping[str, Any]], head: tuple[int, str] | None = None) -> ChainReport:
    """Check the chain in id order; `head` is the (last id, last hash) kept beside it, to catch truncation."""
    prev_hash = GENESIS
    prev_id = 0
    count = 0
    for rec in records:
        count += 1
        rid = int(rec["id"])
        if rid != prev_id + 1:
            return ChainReport(False, count, rid, f"record {rid} follows record {prev_id}: records were deleted")
        if rec["prev_hash"] != prev_hash:
            return ChainReport(False, count, rid, f"record {rid} does not link to record {prev_id}")
        if record_hash(prev_hash, rec) != rec["hash"]:
            return ChainReport(False, count, rid, f"record {rid} was modified: its content does not match its hash")
        prev_hash, prev_id = rec["hash"], rid
    if head is not None and head != (prev_id, prev_hash) and not (head[0] == 0 and prev_id == 0):
        return ChainReport(
            False,
            count,
            prev_id + 1,
            f"the chain ends at record {prev_id} but the head says {head[0]}: records were removed",
        )
    return ChainReport(True, count)
