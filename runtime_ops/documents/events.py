"""S3 event notifications, as delivered through SQS, turned into the object versions the landing ledger records.

Pure logic: no boto3, no Dagster. The landing sensor's event mode (``runtime_ops/documents/sensors.py``)
receives the messages (``runtime_ops/landing/queue.py``) and records what :func:`plan_versions` returns.

Accepted message bodies
-----------------------
* S3 → SQS (and S3 → SNS → SQS, with or without raw delivery): ``{"Records": [{"eventSource": "aws:s3",
  "eventName": "ObjectCreated:Put", "eventTime": ..., "s3": {"bucket": {"name"}, "object": {"key", "size",
  "eTag", "versionId", "sequencer"}}}]}``. Keys are URL-encoded with ``+`` for a space: decoded with
  ``unquote_plus``.
* EventBridge → SQS: ``{"source": "aws.s3", "detail-type": "Object Created" | "Object Deleted", "time": ...,
  "detail": {"bucket": {"name"}, "object": {"key", "size", "etag", "version-id", "sequencer"}}}``. EventBridge
  keys are not URL-encoded (AWS's examples carry raw ``:`` and ``/``), so they are taken as they are.
* ``{"Event": "s3:TestEvent"}`` (sent once when notifications are configured): ignored.

Versions
--------
The ledger version of an object is its **ETag without quotes**, exactly what listing mode records and what
``S3LandingSource.read`` sends as ``If-Match``: the two modes share one ledger, so switching modes, or running
a listing pass over a bucket that also sends events, never ingests an object twice. The S3 ``versionId`` is
kept on the event (for logs and as a tie-breaker) and becomes the ledger version only when an event has no
ETag at all. (A ``versionId`` as the ledger version would make every read of a versioned bucket fail its
``If-Match`` and disagree with listing mode.)

Ordering and duplicates
-----------------------
Delivery is at-least-once and unordered. :func:`plan_versions` keeps one entry per (key, version); for the
versions of one key it orders them by ``sequencer`` (hex strings compared after right-padding with ``0`` to
equal length), oldest first, so the newest version is recorded last, gets the highest ledger id and is the one
``store_chunks`` makes current. Every distinct version is still recorded once: an older version that has been
overwritten since is quarantined as ``changed`` when its run reads it. Events without a sequencer (moto, some
S3-compatible stores) are ordered by event time, then by arrival. A created version followed, in the same
poll, by a removal of its key with a higher sequencer is dropped (the object is gone; listing mode would never
have seen it either). Removals are otherwise acknowledged and not recorded: a document whose object was
deleted after it was recorded is quarantined as ``gone`` by its run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

__all__ = [
    "CREATED",
    "REMOVED",
    "ObjectEvent",
    "ObjectVersion",
    "ParsedBody",
    "Plan",
    "compare_sequencers",
    "parse_body",
    "plan_versions",
    "relative_key",
]

CREATED = "created"
REMOVED = "removed"

# S3 event-name families (after an optional "s3:" prefix) and EventBridge detail types we act on.
_S3_CREATED = ("ObjectCreated:",)
_S3_REMOVED = ("ObjectRemoved:", "LifecycleExpiration:")
_EB_KINDS = {"Object Created": CREATED, "Object Deleted": REMOVED}
_MAX_SNS_DEPTH = 2


@dataclass(frozen=True)
class ObjectEvent:
    kind: str  # CREATED | REMOVED
    bucket: str
    key: str  # the full object key in the bucket, decoded
    version: str  # the ledger version: ETag without quotes (versionId only when there is no ETag); "" if removed
    size: int
    sequencer: str | None
    version_id: str | None
    event_time: datetime | None
    name: str  # "ObjectCreated:Put", "Object Created", ...


@dataclass
class ParsedBody:
    """What one message body holds: object events, records skipped on purpose, and malformed records."""

    events: list[ObjectEvent] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # e.g. "s3:TestEvent", "ObjectTagging:Put"
    errors: list[str] = field(default_factory=list)  # a malformed body or record, with the reason

    @property
    def malformed(self) -> bool:
        """True when nothing usable came out of the body (it is logged and acknowledged)."""
        return bool(self.errors) and not self.events and not self.ignored


@dataclass(frozen=True)
class ObjectVersion:
    key: str
    version: str
    size: int
    last_modified: datetime | None
    sequencer: str | None = None
    version_id: str | None = None


@dataclass
class Plan:
    objects: list[ObjectVersion] = field(default_factory=list)  # distinct (key, version); per key oldest first
    duplicates: int = 0  # created events whose (key, version) was already in this poll
    dropped_removed: int = 0  # created versions removed again later in the same poll
    removals: int = 0  # removal events
    latest: dict[str, str] = field(default_factory=dict)  # key -> version with the highest sequencer
    deleted: list[str] = field(default_factory=list)  # keys whose last event in the poll is a removal


# ----------------------------------------------------------------------------------------------- parsing


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _time(value: Any) -> datetime | None:
    """ISO-8601 (``2024-05-01T12:00:00.123Z``) or epoch seconds (moto's EventBridge events) → aware UTC."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
        except ValueError:
            return None
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    return None


def _size(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _object_event(
    kind: str, name: str, bucket: Any, obj: Any, *, key_encoded: bool, etag_field: str, version_field: str,
    event_time: datetime | None,
) -> ObjectEvent:  # fmt: skip
    """Validate one record's bucket/object parts; ValueError names what is wrong."""
    bucket_name = _text(bucket.get("name")) if isinstance(bucket, dict) else None
    if bucket_name is None:
        raise ValueError("no bucket name")
    if not isinstance(obj, dict):
        raise ValueError("no object")
    raw_key = _text(obj.get("key"))
    if raw_key is None:
        raise ValueError("no object key")
    key = unquote_plus(raw_key) if key_encoded else raw_key
    etag_value = obj.get(etag_field)
    if etag_value is None and etag_field != "eTag":
        etag_value = obj.get("eTag")  # moto's EventBridge events spell it like the S3 records do
    etag = (_text(etag_value) or "").strip('"') or None
    version_id = _text(obj.get(version_field))
    sequencer = _text(obj.get("sequencer"))
    if kind == REMOVED:
        return ObjectEvent(kind, bucket_name, key, "", 0, sequencer, version_id, event_time, name)
    version = etag or version_id
    if version is None:
        raise ValueError(f"object {key!r} has neither an ETag nor a versionId")
    size = _size(obj.get("size"))
    if size is None:
        raise ValueError(f"object {key!r} has no valid size ({obj.get('size')!r})")
    return ObjectEvent(kind, bucket_name, key, version, size, sequencer, version_id, event_time, name)


def _s3_record(record: Any, out: ParsedBody) -> None:
    if not isinstance(record, dict):
        out.errors.append(f"record is a {type(record).__name__}, not an object")
        return
    name = _text(record.get("eventName"))
    if name is None:
        out.errors.append("record has no eventName")
        return
    short = name[3:] if name.startswith("s3:") else name
    if short.startswith(_S3_CREATED):
        kind = CREATED
    elif short.startswith(_S3_REMOVED):
        kind = REMOVED
    else:
        out.ignored.append(short)
        return
    s3 = record.get("s3")
    if not isinstance(s3, dict):
        out.errors.append(f"{short} record has no s3 section")
        return
    try:
        event = _object_event(
            kind, short, s3.get("bucket"), s3.get("object"), key_encoded=True, etag_field="eTag",
            version_field="versionId", event_time=_time(record.get("eventTime")),
        )  # fmt: skip
    except ValueError as exc:
        out.errors.append(f"{short} record: {exc}")
        return
    out.events.append(event)


def _eventbridge(body: dict[str, Any], out: ParsedBody) -> None:
    detail_type = _text(body.get("detail-type")) or ""
    kind = _EB_KINDS.get(detail_type)
    if kind is None:
        out.ignored.append(f"EventBridge {detail_type or '(no detail-type)'}")
        return
    detail = body.get("detail")
    if not isinstance(detail, dict):
        out.errors.append(f"EventBridge {detail_type} event has no detail")
        return
    try:
        event = _object_event(
            kind, detail_type, detail.get("bucket"), detail.get("object"), key_encoded=False, etag_field="etag",
            version_field="version-id", event_time=_time(body.get("time")),
        )  # fmt: skip
    except ValueError as exc:
        out.errors.append(f"EventBridge {detail_type} event: {exc}")
        return
    out.events.append(event)


def _parse_document(doc: Any, out: ParsedBody, depth: int) -> None:
    if not isinstance(doc, dict):
        out.errors.append(f"body is a JSON {type(doc).__name__}, not an object")
        return
    if "Records" in doc:
        records = doc["Records"]
        if not isinstance(records, list):
            out.errors.append("Records is not a list")
            return
        if not records:
            out.ignored.append("no records")
        for record in records:
            _s3_record(record, out)
        return
    if _text(doc.get("Event")) == "s3:TestEvent":
        out.ignored.append("s3:TestEvent")
        return
    if "detail-type" in doc and doc.get("source") in ("aws.s3", None):
        _eventbridge(doc, out)
        return
    if doc.get("Type") == "Notification" and isinstance(doc.get("Message"), str) and depth < _MAX_SNS_DEPTH:
        _parse_text(doc["Message"], out, depth + 1)  # S3 → SNS → SQS without raw message delivery
        return
    out.errors.append("not an S3 event notification (no Records, no detail-type, not s3:TestEvent)")


def _parse_text(text: str, out: ParsedBody, depth: int) -> None:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        out.errors.append(f"body is not JSON ({exc.__class__.__name__}: {str(exc)[:80]})")
        return
    _parse_document(doc, out, depth)


def parse_body(body: str | bytes) -> ParsedBody:
    """Parse one SQS message body. Never raises: problems are reported in ``errors``."""
    out = ParsedBody()
    if isinstance(body, bytes | bytearray):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            out.errors.append("body is not UTF-8")
            return out
    if not isinstance(body, str):
        out.errors.append(f"body is a {type(body).__name__}")
        return out
    _parse_text(body, out, 0)
    return out


# ---------------------------------------------------------------------------------------------- ordering


def compare_sequencers(a: str, b: str) -> int:
    """-1, 0 or 1: S3 sequencers are hex strings compared after right-padding the shorter with zeros."""
    width = max(len(a), len(b))
    pa, pb = a.upper().ljust(width, "0"), b.upper().ljust(width, "0")
    return (pa > pb) - (pa < pb)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _order_key(event: ObjectEvent, arrival: int, width: int) -> tuple[str, datetime, int]:
    """Sort key of one event among the events of the same key: sequencer (padded to the group's width), then
    event time, then arrival order (events without a sequencer sort by the last two only)."""
    seq = event.sequencer.upper().ljust(width, "0") if event.sequencer else ""
    return (seq, event.event_time or _EPOCH, arrival)


def relative_key(full_key: str, prefix: str) -> str | None:
    """The landing key of ``full_key`` under ``prefix`` (``""`` or ending in ``/``), or None when outside."""
    if prefix and not full_key.startswith(prefix):
        return None
    key = full_key[len(prefix) :]
    return key or None


def plan_versions(
    events: Iterable[ObjectEvent],
    *,
    key_of: Callable[[ObjectEvent], str | None] = lambda e: e.key,
) -> Plan:
    """The distinct (key, version) pairs to record, from the events of one poll.

    ``key_of`` maps an event to its landing key (None: not ours, skipped). Output: keys in code-point (= S3)
    order; the versions of one key oldest first by sequencer (see the module docstring), each once, placed by
    its highest sequencer.
    """
    plan = Plan()
    by_key: dict[str, list[tuple[int, ObjectEvent]]] = {}
    for arrival, event in enumerate(events):
        key = key_of(event)
        if key is None:
            continue
        by_key.setdefault(key, []).append((arrival, event))
    for key in sorted(by_key):
        group = by_key[key]
        width = max((len(e.sequencer) for _, e in group if e.sequencer), default=0)
        ordered = sorted(group, key=lambda item: _order_key(item[1], item[0], width))
        removals = [e for _, e in ordered if e.kind == REMOVED]
        plan.removals += len(removals)
        last_removal = max((e.sequencer for e in removals if e.sequencer), key=lambda s: s.ljust(width, "0").upper(),
                           default=None)  # fmt: skip
        best: dict[str, tuple[tuple[str, datetime, int], ObjectEvent]] = {}
        for arrival, event in ordered:
            if event.kind != CREATED:
                continue
            if event.version in best:
                plan.duplicates += 1
            best[event.version] = (_order_key(event, arrival, width), event)  # ascending: the last is the highest
        kept: list[tuple[tuple[str, datetime, int], ObjectEvent]] = []
        for order, event in best.values():
            if last_removal and event.sequencer and compare_sequencers(event.sequencer, last_removal) < 0:
                plan.dropped_removed += 1  # created, then deleted again: nothing left to ingest
                continue
            kept.append((order, event))
        kept.sort(key=lambda item: item[0])
        final = ordered[-1][1]
        if final.kind == REMOVED and (final.sequencer or not kept):
            # The key ends deleted in this poll: its document goes, and nothing created before is ingested. (A
            # removal without a sequencer after creations: their order is unknown, and the object's read decides.)
            plan.deleted.append(key)
            plan.dropped_removed += len(kept)
            kept = []
        for _, event in kept:
            plan.objects.append(
                ObjectVersion(key, event.version, event.size, event.event_time, event.sequencer, event.version_id)
            )
        if kept:
            plan.latest[key] = kept[-1][1].version
    return plan
