"""Audit chains: each record's MAC covers its content and the previous record's MAC in its chain (pure, no I/O).

Every approval request is one chain (records of no known request form the `global` chain). The MAC is an
HMAC-SHA256 under a key kept outside the database (`RUNTIME_OPS_AUDIT_KEY`), so someone who can write the
database but not read the key cannot re-chain edited, inserted or deleted records. What the database alone cannot
show - records cut from the end of a chain together with its head - is caught by **anchors**: each chain's head
(seq, MAC), itself MACed, copied from time to time somewhere the database cannot rewrite (an append-only file or
an object store with Object Lock). `verify` names the first problem it finds.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
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


def record_hash(prev_hash: str, record: Mapping[str, Any], key: bytes) -> str:
    """The record's MAC: HMAC-SHA256 under `key` of the previous MAC and the record's canonical content."""
    return hmac.new(key, f"{prev_hash}\n{canonical(record)}".encode(), hashlib.sha256).hexdigest()


def anchor_mac(heads: Mapping[str, tuple[int, str]], at: str, key: bytes) -> str:
    """The MAC of an anchor (heads by chain, taken at `at`): an anchor edited without the key fails."""
    body = json.dumps({"at": at, "heads": {c: list(h) for c, h in sorted(heads.items())}}, separators=(",", ":"))
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


@functools.lru_cache(maxsize=8)
def key_id(key: bytes) -> str:
    """A public name for a key (which key MACed an anchor or a record), not a way back to it."""
    return hashlib.sha256(b"runtime_ops audit key id\n" + key).hexdigest()[:16]


@dataclass(frozen=True)
class Anchor:
    at: str  # when it was taken (ISO 8601)
    heads: dict[str, tuple[int, str]]  # chain -> (seq, MAC) of the chains that changed since the anchor before
    mac: str
    kid: str | None = None  # key_id of the key it was MACed under (anchors of a rotated-out key are not checked)

    def valid(self, key: bytes) -> bool:
        return hmac.compare_digest(self.mac, anchor_mac(self.heads, self.at, key))


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    records: int
    first_broken_id: int | None = None
    problem: str | None = None
    anchors: int = 0
    wrong_key: bool = False  # the log is not under the key given (rather than altered under it)


def _forged(rid: int) -> str:
    return f"record {rid} was modified or forged: its MAC does not match under the audit key"


def wrong_key_problem(given: str, wanted: str, evidence: str) -> str:
    """The one message for a key that is not the log's: both key ids, and which to set."""
    return (
        f"wrong audit key: the key given has key id {given} but {evidence} key id {wanted}; set "
        f"RUNTIME_OPS_AUDIT_KEY to the key whose id is {wanted}"
    )


def newest_keyed(anchors: Iterable[Anchor]) -> Anchor | None:
    """The newest anchor that names its key: taken under the key in use then (`audit rekey` anchors under the new
    key at once), so its key id is the log's."""
    return max((a for a in anchors if a.kid is not None), key=lambda a: datetime.fromisoformat(a.at), default=None)


def _newest_key_mismatch(anchors: list[Anchor], current: str) -> str | None:
    newest = newest_keyed(anchors)
    if newest is None or newest.kid == current:
        return None
    return wrong_key_problem(current, str(newest.kid), f"the newest anchor (of {newest.at}) was taken under")


def verify(
    records: Iterable[Mapping[str, Any]],
    key: bytes,
    heads: Mapping[str, tuple[int, str]] | None = None,
    anchors: Iterable[Anchor] = (),
) -> ChainReport:
    """Check every chain in `records` (each chain's records in position order, chains in any order) under
    `key`; `heads` maps chain -> (last seq, last MAC) kept beside the log (records removed from the end without
    moving the head); `anchors`, taken outside the database, catch a head moved back with them. Each anchored
    (chain, seq) must still be in the log, unchanged."""
    last: dict[str, tuple[int, str, int]] = {}  # chain -> (seq, MAC, record id)
    wanted: dict[tuple[str, int], tuple[str, str]] = {}  # (chain, seq) -> (MAC, anchor time)
    n_anchors = 0
    current = key_id(key)
    anchors = list(anchors)
    mismatch = _newest_key_mismatch(anchors, current)
    if mismatch is not None:
        return ChainReport(False, 0, None, mismatch, wrong_key=True)
    for anchor in anchors:
        if anchor.kid is not None and anchor.kid != current:
            continue  # taken before the key was rotated (`audit rekey` verified the log then, and anchored anew)
        n_anchors += 1
        if not anchor.valid(key):
            return ChainReport(False, 0, None, f"the anchor of {anchor.at} was altered: its MAC does not match")
        for chain, (seq, mac) in anchor.heads.items():
            wanted[(chain, int(seq))] = (mac, anchor.at)
    # A record whose MAC fails is judged by the next record of its chain: linking past it, it was inserted;
    # otherwise it was edited (or forged).
    suspect: dict[str, tuple[int, str]] = {}  # chain -> (record id, the prev MAC it claimed)
    count = 0
    for rec in records:
        count += 1
        rid, chain = int(rec["id"]), str(rec["chain"])
        seq, prev_hash, _ = last.get(chain, (0, GENESIS, 0))
        if int(rec["seq"]) != seq + 1:
            kind = "deleted" if int(rec["seq"]) > seq + 1 else "inserted or reordered"
            return ChainReport(
                False,
                count,
                rid,
                f"record {rid} is #{rec['seq']} of chain {chain} but #{seq + 1} was expected: records were {kind}",
            )
        if chain in suspect:
            bad, claimed = suspect.pop(chain)
            if rec["prev_hash"] == claimed:
                problem = f"record {bad} of chain {chain} was inserted: record {rid}, the next, links past it"
                return ChainReport(False, count, bad, problem)
            return ChainReport(False, count, bad, _forged(bad))
        if rec["prev_hash"] != prev_hash:
            problem = (
                f"record {rid} does not link to the previous record of chain {chain}: "
                "a record before it was deleted or replaced"
            )
            return ChainReport(False, count, rid, problem)
        if not hmac.compare_digest(record_hash(prev_hash, rec, key), str(rec["hash"])):
            kid = rec.get("key_id")
            if kid is not None and kid != current:
                evidence = f"record {rid} (#{seq + 1} of chain {chain}) does not verify and names"
                return ChainReport(False, count, rid, wrong_key_problem(current, str(kid), evidence), wrong_key=True)
            suspect[chain] = (rid, str(rec["prev_hash"]))
        anchored = wanted.pop((chain, seq + 1), None)
        if anchored is not None and anchored[0] != rec["hash"]:
            problem = f"record {rid} (#{seq + 1} of chain {chain}) differs from its anchor of {anchored[1]}"
            return ChainReport(False, count, rid, problem)
        last[chain] = (seq + 1, rec["hash"], rid)
    if suspect:
        bad = min(rid for rid, _ in suspect.values())
        return ChainReport(False, count, bad, _forged(bad))
    for chain, (head_seq, head_hash) in (heads or {}).items():
        seq, last_hash, rid = last.get(chain, (0, GENESIS, 0))
        if (seq, last_hash) != (head_seq, head_hash):
            ends = f"ends at #{seq} (record {rid})" if rid else "has no records"
            if head_seq > seq:
                problem = f"chain {chain} {ends} but its head says #{head_seq}: records were removed from its end"
            else:
                problem = f"chain {chain} {ends} but its head says #{head_seq}: the head or the records were rewritten"
            return ChainReport(False, count, rid or None, problem)
    if wanted:
        (chain, seq), (_, at) = min(wanted.items(), key=lambda kv: kv[1][1])
        ends = last.get(chain, (0, GENESIS, 0))[0]
        return ChainReport(
            False,
            count,
            None,
            f"chain {chain} was truncated: the anchor of {at} saw record #{seq}, the log now ends at #{ends}",
            n_anchors,
        )
    return ChainReport(True, count, anchors=n_anchors)
