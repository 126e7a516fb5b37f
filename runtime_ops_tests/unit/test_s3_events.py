"""S3 event notification parsing and per-poll dedup/ordering (runtime_ops/documents/events.py), no I/O."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from runtime_ops.documents.events import (
    CREATED,
    REMOVED,
    ObjectEvent,
    compare_sequencers,
    parse_body,
    plan_versions,
    relative_key,
)


def s3_record(
    key: str,
    etag: str = "e1",
    *,
    name: str = "ObjectCreated:Put",
    bucket: str = "b",
    size: int = 3,
    sequencer: str | None = None,
    version_id: str | None = None,
    time: str = "2024-05-01T12:00:00.123Z",
) -> dict:
    obj: dict = {"key": key, "size": size, "eTag": etag}
    if sequencer is not None:
        obj["sequencer"] = sequencer
    if version_id is not None:
        obj["versionId"] = version_id
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventTime": time,
        "eventName": name,
        "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"}, "object": obj},
    }


def s3_body(*records) -> str:
    return json.dumps({"Records": list(records)})


def eventbridge_body(
    key: str,
    etag: str = "e1",
    *,
    detail_type: str = "Object Created",
    bucket: str = "b",
    sequencer: str | None = "617f08299329d189",
    version_id: str | None = None,
) -> str:
    obj: dict = {"key": key, "size": 5, "etag": etag}
    if sequencer:
        obj["sequencer"] = sequencer
    if version_id:
        obj["version-id"] = version_id
    return json.dumps(
        {
            "version": "0",
            "id": "17793124-05d4-b198-2fde-7ededc63b103",
            "detail-type": detail_type,
            "source": "aws.s3",
            "account": "111122223333",
            "time": "2021-11-12T00:00:00Z",
            "region": "ca-central-1",
            "resources": [f"arn:aws:s3:::{bucket}"],
            "detail": {"version": "0", "bucket": {"name": bucket}, "object": obj, "reason": "PutObject"},
        }
    )


def ev(key: str, version: str, seq: str | None = None, *, kind: str = CREATED, t: int = 0) -> ObjectEvent:
    when = datetime(2024, 1, 1, 0, 0, t, tzinfo=UTC)
    return ObjectEvent(kind, "b", key, version if kind == CREATED else "", 1, seq, None, when, kind)


# ----------------------------------------------------------------------------------------------- parsing


def test_s3_record_key_is_url_decoded_with_plus_for_space():
    parsed = parse_body(s3_body(s3_record("in/red+flower%281%29+%2B+caf%C3%A9.txt", '"abc"')))
    [e] = parsed.events
    assert e.key == "in/red flower(1) + café.txt"
    assert e.version == "abc"  # quotes stripped
    assert (e.kind, e.bucket, e.size, e.name) == (CREATED, "b", 3, "ObjectCreated:Put")
    assert e.event_time == datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
    assert parsed.errors == [] and parsed.ignored == []


def test_version_is_the_etag_even_when_a_version_id_is_present():
    [e] = parse_body(s3_body(s3_record("k", "etag1", version_id="3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"))).events
    assert e.version == "etag1" and e.version_id == "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"
    record = s3_record("k", "x", version_id="v-only")
    del record["s3"]["object"]["eTag"]
    [e] = parse_body(s3_body(record)).events
    assert e.version == "v-only"  # no ETag at all: the versionId is the best identity there is


def test_moto_records_without_sequencer_or_version_id_parse():
    [e] = parse_body(s3_body(s3_record("a.txt"))).events
    assert e.sequencer is None and e.version_id is None


def test_test_event_is_ignored_not_malformed():
    body = json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent", "Time": "2024-01-01T00:00:00Z", "Bucket": "b"})
    parsed = parse_body(body)
    assert parsed.events == [] and parsed.ignored == ["s3:TestEvent"] and not parsed.malformed


def test_eventbridge_object_created_and_deleted():
    [e] = parse_body(eventbridge_body("raw/2023-08-08T14:03:40.zip", "4af9-12", version_id="uhgg")).events
    assert e.key == "raw/2023-08-08T14:03:40.zip"  # EventBridge keys are not URL-encoded
    assert (e.kind, e.version, e.size, e.sequencer, e.version_id) == (CREATED, "4af9-12", 5, "617f08299329d189", "uhgg")
    assert e.event_time == datetime(2021, 11, 12, tzinfo=UTC)
    [d] = parse_body(eventbridge_body("k", detail_type="Object Deleted")).events
    assert d.kind == REMOVED
    other = parse_body(eventbridge_body("k", detail_type="Object Tags Added"))
    assert other.events == [] and other.ignored == ["EventBridge Object Tags Added"]


def test_moto_eventbridge_spelling_etag_and_epoch_time():
    body = json.loads(eventbridge_body("k"))
    obj = body["detail"]["object"]
    obj["eTag"] = obj.pop("etag")
    body["time"] = 1700000000.5
    [e] = parse_body(json.dumps(body)).events
    assert e.version == "e1" and e.event_time == datetime.fromtimestamp(1700000000.5, tz=UTC)


def test_removals_and_other_event_types():
    parsed = parse_body(
        s3_body(
            s3_record("a", name="ObjectRemoved:Delete"),
            s3_record("b", name="ObjectRemoved:DeleteMarkerCreated"),
            s3_record("c", name="s3:ObjectCreated:CompleteMultipartUpload"),  # MinIO-style "s3:" prefix
            s3_record("d", name="ObjectTagging:Put"),
            s3_record("e", name="ObjectRestore:Completed"),
        )
    )
    assert [(e.key, e.kind) for e in parsed.events] == [("a", REMOVED), ("b", REMOVED), ("c", CREATED)]
    assert parsed.ignored == ["ObjectTagging:Put", "ObjectRestore:Completed"]


def test_sns_envelope_is_unwrapped():
    body = json.dumps({"Type": "Notification", "MessageId": "m", "Message": s3_body(s3_record("x.txt"))})
    [e] = parse_body(body).events
    assert e.key == "x.txt"


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        b"\xff\xfe",
        "[1, 2]",
        "{}",
        json.dumps({"Records": "nope"}),
        s3_body({"eventName": "ObjectCreated:Put"}),
        s3_body(s3_record("k") | {"s3": {"bucket": {"name": "b"}, "object": {"size": 1, "eTag": "e"}}}),
        s3_body(s3_record("k", size=-1)),
        json.dumps({"detail-type": "Object Created", "source": "aws.s3", "detail": "x"}),
    ],
)
def test_malformed_bodies_are_reported_never_raised(body):
    parsed = parse_body(body)
    assert parsed.malformed and parsed.errors and parsed.events == []


def test_a_bad_record_does_not_hide_the_good_ones():
    bad = s3_record("k")
    del bad["s3"]["object"]["size"]
    parsed = parse_body(s3_body(bad, s3_record("good.txt")))
    assert [e.key for e in parsed.events] == ["good.txt"]
    assert len(parsed.errors) == 1 and "size" in parsed.errors[0] and not parsed.malformed


# ---------------------------------------------------------------------------------------------- planning


def test_sequencers_compare_after_right_padding():
    assert compare_sequencers("0A1B2C3D4E5F678901", "0A1B2C3D4E5F6789") > 0
    assert compare_sequencers("0A1B2C3D4E5F6789", "0A1B2C3D4E5F678900") == 0
    assert compare_sequencers("0a1b", "0A1C") < 0  # case-insensitive hex
    assert compare_sequencers("FF", "0FFF") > 0  # padding, not numeric length


def test_duplicates_collapse_to_one_version_each():
    events = [ev("a", "1"), ev("b", "1"), ev("a", "1"), ev("a", "1"), ev("b", "1")]
    plan = plan_versions(events)
    assert [(o.key, o.version) for o in plan.objects] == [("a", "1"), ("b", "1")]
    assert plan.duplicates == 3


def test_versions_of_a_key_are_ordered_by_sequencer_newest_last():
    events = [ev("k", "v3", "0A3"), ev("k", "v1", "0A1"), ev("k", "v2", "0A2"), ev("k", "v3", "0A3")]
    plan = plan_versions(events)
    assert [o.version for o in plan.objects] == ["v1", "v2", "v3"]  # every version once, the newest last
    assert plan.latest == {"k": "v3"} and plan.duplicates == 1


def test_sequencers_of_different_lengths_order_by_padding():
    plan = plan_versions([ev("k", "new", "0A1B2C3D4E5F678901"), ev("k", "old", "0A1B2C3D4E5F6789")])
    assert [o.version for o in plan.objects] == ["old", "new"]


def test_a_version_written_twice_is_placed_by_its_highest_sequencer():
    # content A, then B, then A again: A is the current object and must be recorded last
    plan = plan_versions([ev("k", "A", "01"), ev("k", "B", "02"), ev("k", "A", "03")])
    assert [o.version for o in plan.objects] == ["B", "A"] and plan.latest == {"k": "A"}


def test_without_sequencers_event_time_then_arrival_order():
    plan = plan_versions([ev("k", "late", t=5), ev("k", "early", t=1), ev("k", "tie2", t=9), ev("k", "tie1", t=9)])
    assert [o.version for o in plan.objects] == ["early", "late", "tie2", "tie1"]


def test_created_then_removed_in_the_same_poll_is_dropped_but_recreated_is_kept():
    events = [
        ev("gone", "v1", "10"),
        ev("gone", "", "11", kind=REMOVED),
        ev("back", "v1", "10"),
        ev("back", "", "11", kind=REMOVED),
        ev("back", "v2", "12"),
        ev("nosq", "v1"),
        ev("nosq", "", kind=REMOVED),  # no sequencer: order unknown, keep the version (its read decides)
    ]
    plan = plan_versions(events)
    assert [(o.key, o.version) for o in plan.objects] == [("back", "v2"), ("nosq", "v1")]
    assert plan.dropped_removed == 2 and plan.removals == 3


def test_key_of_filters_and_maps_keys():
    events = [ev("in/a.txt", "1"), ev("other/b.txt", "1"), ev("in/", "1")]
    plan = plan_versions(events, key_of=lambda e: relative_key(e.key, "in/"))
    assert [(o.key, o.version) for o in plan.objects] == [("a.txt", "1")]
    assert relative_key("x", "") == "x"


def test_any_delivery_order_gives_the_same_plan():
    rng = random.Random(7)
    events = [ev(f"k{i % 40}", f"v{i % 3}", f"{i % 3:02X}{i % 40:04X}") for i in range(300)]
    expected = [(o.key, o.version) for o in plan_versions(events).objects]
    assert len(expected) == 40 * 3 and len(set(expected)) == len(expected)
    for _ in range(20):
        shuffled = events[:]
        rng.shuffle(shuffled)
        dup = shuffled + rng.sample(shuffled, 90)  # 30% redelivered
        assert [(o.key, o.version) for o in plan_versions(dup).objects] == expected


def test_module_is_pure():
    code = (
        "import sys, runtime_ops.documents.events as m; "
        "bad = [n for n in ('dagster', 'boto3', 'botocore', 'sqlalchemy') if n in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
