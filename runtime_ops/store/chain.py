"""Audit chains: each record's hash covers its content and the previous record's hash in its chain.

Every approval request is one chain (records of no known request form the `global` chain). Editing,
deleting or reordering a record breaks its chain; `verify` names the first broken record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

GENESIS = "0" * 64
GLOBAL_CHAIN = "global"
FIELDS = ("chain", "seq", "at", "request_id", "event", "actor", "channel", "outcome", "detail")


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


def verify(records: Iterable[Mapping[str, Any]], heads: Mapping[str, tuple[int, str]] | None = None) -> ChainReport:
    """Check every chain in `records` (read in id order); `heads` maps chain -> (last seq, last hash) kept
    beside the log, to catch records removed from the end of a chain."""
    last: dict[str, tuple[int, str, int]] = {}  # chain -> (seq, hash, record id)
    count = 0
    for rec in records:
        count += 1
        rid, chain = int(rec["id"]), str(rec["chain"])
        seq, prev_hash, _ = last.get(chain, (0, GENESIS, 0))
        if int(rec["seq"]) != seq + 1:
            return ChainReport(
                False,
                count,
                rid,
                f"record {rid} is #{rec['seq']} of chain {chain} but #{seq + 1} was expected: records were deleted",
            )
        if rec["prev_hash"] != prev_hash:
            return ChainReport(False, count, rid, f"record {rid} does not link to the previous record of chain {chain}")
        if record_hash(prev_hash, rec) != rec["hash"]:
            return ChainReport(False, count, rid, f"record {rid} was modified: its content does not match its hash")
        last[chain] = (seq + 1, rec["hash"], rid)
    for chain, (head_seq, head_hash) in (heads or {}).items():
        seq, last_hash, rid = last.get(chain, (0, GENESIS, 0))
        if (seq, last_hash) != (head_seq, head_hash):
            return ChainReport(
                False,
                count,
                rid or None,
                f"chain {chain} ends at #{seq} but its head says #{head_seq}: records were removed",
            )
    return ChainReport(True, count)
