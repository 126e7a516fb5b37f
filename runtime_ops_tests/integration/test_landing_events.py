"""Event mode of the landing sensor: S3 event notifications from SQS, on moto's HTTP server (S3 → SQS
notifications configured on the bucket), against real PostgreSQL storage."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from runtime_ops.landing import queue as queue_module
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support import servers
from runtime_ops_tests.support.flow import Flow

PREFIX = "incoming/"


@pytest.fixture(autouse=True)
def _moto_sqs_without_quadratic_receive(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto 5's SQS computes every queue attribute (an O(queue) scan, calling a slow `unix_time` per message)
    on each SendMessage and once per message handed out by ReceiveMessage: draining 1,300 messages takes
    minutes. Real SQS has no such cost, so the in-process emulator gets the same semantics, computed directly."""
    from moto.sqs import models

    def now(dt=None):  # type: ignore[no-untyped-def]
        return time.time() if dt is None else real_unix_time(dt)

    def valid(self, queue_name, message):  # type: ignore[no-untyped-def]
        retention = int(self.get_queue(queue_name).message_retention_period)
        return retention + message.sent_timestamp / 1000 > time.time()

    real_unix_time = models.unix_time  # pyright: ignore[reportPrivateImportUsage]  # moto's import, patched on purpose
    monkeypatch.setattr(models, "unix_time", now)
    monkeypatch.setattr(models, "unix_time_millis", lambda dt=None: now(dt) * 1000.0)
    monkeypatch.setattr(models.SQSBackend, "is_message_valid_based_on_retention_period", valid)


class SQS:
    """The test's side of the queue: raw boto3 calls that bypass the code under test."""

    def __init__(self, client, url: str) -> None:  # type: ignore[no-untyped-def]
        self.client, self.url = client, url

    def drain(self) -> list[str]:
        """Receive and delete every message now in the queue; returns their bodies in arrival order."""
        bodies: list[str] = []
        empty = 0
        while empty < 2:
            msgs = self.client.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
                "Messages", []
            )
            if not msgs:
                empty += 1
                continue
            bodies += [m["Body"] for m in msgs]
            self.client.delete_message_batch(
                QueueUrl=self.url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)],
            )
        return bodies

    def send(self, bodies: list[str]) -> None:
        for start in range(0, len(bodies), 10):
            chunk = bodies[start : start + 10]
            resp = self.client.send_message_batch(
                QueueUrl=self.url, Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(chunk)]
            )
            assert not resp.get("Failed"), resp["Failed"]

    def depth(self) -> int:
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        attrs = self.client.get_queue_attributes(QueueUrl=self.url, AttributeNames=names)["Attributes"]
        return sum(int(attrs[n]) for n in names)


@pytest.fixture
def events(env, postgres_url, s3_bucket, aws_env):  # type: ignore[no-untyped-def]
    """A bucket whose ObjectCreated notifications for incoming/*.txt go to a fresh queue; runtime_ops pointed
    at both (event mode). Yields (s3 client, bucket, SQS helper)."""
    s3, bucket = s3_bucket
    sqs_client = aws_env.client("sqs")
    url = sqs_client.create_queue(QueueName=servers.unique_name("landing", sep="-"))["QueueUrl"]
    arn = sqs_client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {
                        "Key": {
                            "FilterRules": [{"Name": "prefix", "Value": PREFIX}, {"Name": "suffix", "Value": ".txt"}]
                        }
                    },
                }
            ]
        },
    )
    env(
        database_url=postgres_url,
        landing=f"s3://{bucket}/{PREFIX.rstrip('/')}",
        AWS_ENDPOINT_URL=aws_env.endpoint_url,
        RUNTIME_OPS_SQS_QUEUE_URL=url,
    )
    yield s3, bucket, SQS(sqs_client, url)
    sqs_client.delete_queue(QueueUrl=url)


def _put(s3, bucket: str, key: str, data: bytes) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    etag = s3.put_object(Bucket=bucket, Key=PREFIX + key, Body=data)["ETag"].strip('"')
    return key, etag


def _ledger() -> list[tuple[str, str]]:
    store = open_store(get_settings().resolved_database_url, get_settings())
    with store.tx() as conn:
        from sqlalchemy import select

        from runtime_ops.store import schema as t

        return [(r.key, r.version) for r in conn.execute(select(t.documents.c.key, t.documents.c.version))]


def _eventbridge_body(bucket: str, key: str, etag: str, size: int) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "17793124-05d4-b198-2fde-7ededc63b103",
            "detail-type": "Object Created",
            "source": "aws.s3",
            "account": "123456789012",
            "time": "2024-05-01T12:00:00Z",
            "region": "us-east-1",
            "resources": [f"arn:aws:s3:::{bucket}"],
            "detail": {
                "version": "0",
                "bucket": {"name": bucket},
                "object": {"key": PREFIX + key, "size": size, "etag": etag, "sequencer": "00661F0C1D2E3F4A5B"},
                "reason": "PutObject",
            },
        }
    )


def test_1000_objects_with_30pct_duplicates_and_reordering_are_each_recorded_once(
    events, dagster_instance, monkeypatch
):
    s3, bucket, sqs = events
    rng = random.Random(20240501)
    # 999 objects notified by S3 (names with spaces, '+', '%' and non-ASCII exercise the key decoding) ...
    names = [f"docs/d{i % 10}/report {i:04d}+v1%{'é' if i % 7 == 0 else 'x'}.txt" for i in range(999)]
    with ThreadPoolExecutor(16) as pool:
        expected = dict(pool.map(lambda n: _put(s3, bucket, n, f"document {n}".encode()), names))
    # ... and one the notification filter skips (not *.txt): it is announced by an EventBridge-format message.
    eb_key, eb_etag = _put(s3, bucket, "eventbridge/from-eventbridge.md", b"# announced by EventBridge")
    expected[eb_key] = eb_etag
    assert len(expected) == 1000

    delivered = sqs.drain()
    assert sum("s3:TestEvent" in b for b in delivered) == 1  # moto's TestEvent on configuration
    object_bodies = [b for b in delivered if "Records" in b]
    assert len(object_bodies) == 999
    # At-least-once and unordered: every body again, 30% of them twice, in one shuffled order (so a duplicate
    # may arrive before its original, in the same poll or in a later tick), plus the test event, the
    # EventBridge message and one malformed body.
    redelivery = [
        *delivered,
        *rng.sample(object_bodies, 300),
        "{not json",
        _eventbridge_body(bucket, eb_key, eb_etag, 26),
    ]
    rng.shuffle(redelivery)
    sqs.send(redelivery)
    assert sqs.depth() == len(redelivery) == 1302

    flow = Flow(dagster_instance)
    requests = []
    for _ in range(10):
        requests += flow.tick("landing_sensor")
        if sqs.depth() == 0:
            break
    assert sqs.depth() == 0, "the queue was not drained"

    ledger = _ledger()
    assert len(ledger) == 1000 and set(Counter(ledger).values()) == {1}  # each key+version exactly once
    assert dict(ledger) == expected  # nothing lost; same version (ETag) as listing mode would record
    store = open_store(get_settings().resolved_database_url, get_settings())
    batches = store.ledger.batches()
    assert sum(b["n_objects"] for b in batches) == 1000
    assert len(batches) >= 2 and all(b["n_objects"] <= 1000 for b in batches)  # bounded per tick
    assert sorted(r.run_key for r in requests) == sorted(b["id"] for b in batches)
    assert all(int(r.tags["runtime_ops/objects"]) == b["n_objects"] for r, b in zip(requests, batches, strict=True))
    assert {d["key"] for d in store.documents.documents_by_status("pending")} == set(
        expected
    )  # every documents row exists
    assert sorted(dagster_instance.get_dynamic_partitions("demo__landing_batches")) == sorted(b["id"] for b in batches)

    assert flow.tick("landing_sensor") == []  # a final tick launches nothing ...
    assert len(store.ledger.batches()) == len(batches)  # ... and records nothing

    # Both modes share the ledger: a listing pass over the same prefix finds nothing new.
    monkeypatch.delenv("RUNTIME_OPS_SQS_QUEUE_URL")
    get_settings.cache_clear()
    listing = Flow(dagster_instance, launched_keys=set(flow.launched_keys))
    assert listing.tick("landing_sensor") == []
    assert len(store.ledger.batches()) == len(batches)


class _DeleteFails:
    """Patch EventQueue.delete to raise `exc` on its first call (after the batch was recorded)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
        self.calls = 0
        real = queue_module.EventQueue.delete

        def delete(queue, receipts):  # type: ignore[no-untyped-def]
            self.calls += 1
            if self.calls == 1:
                raise exc
            return real(queue, receipts)

        monkeypatch.setattr(queue_module.EventQueue, "delete", delete)


class _Crash(BaseException):
    """The sensor process dying between committing the batch and deleting the messages."""


def _land(s3, bucket: str, n: int) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with ThreadPoolExecutor(8) as pool:
        return dict(pool.map(lambda i: _put(s3, bucket, f"c/{i:03d}.txt", f"crash test {i}".encode()), range(n)))


def test_delete_failure_after_recording_redelivers_without_ingesting_twice(events, dagster_instance, monkeypatch):
    s3, bucket, sqs = events
    monkeypatch.setattr(queue_module, "VISIBILITY_TIMEOUT_SECONDS", 1)
    expected = _land(s3, bucket, 20)
    failing = _DeleteFails(monkeypatch, RuntimeError("SQS is unavailable"))
    flow = Flow(dagster_instance)

    [request] = flow.tick("landing_sensor")  # the batch is durable, so it launches although the delete failed
    assert request.tags["runtime_ops/objects"] == "20" and failing.calls == 1
    assert sqs.depth() == 21  # 20 notifications + the test event, in flight, not deleted

    time.sleep(1.5)  # the visibility timeout passes: SQS redelivers every message
    assert flow.tick("landing_sensor") == []
    assert sqs.depth() == 0
    assert sorted(_ledger()) == sorted(expected.items())
    assert [
        b["n_objects"] for b in open_store(get_settings().resolved_database_url, get_settings()).ledger.batches()
    ] == [20]


def test_crash_between_recording_and_deleting_launches_the_batch_once(events, dagster_instance, monkeypatch):
    s3, bucket, sqs = events
    monkeypatch.setattr(queue_module, "VISIBILITY_TIMEOUT_SECONDS", 1)
    expected = _land(s3, bucket, 20)
    _DeleteFails(monkeypatch, _Crash())
    flow = Flow(dagster_instance)

    with pytest.raises(_Crash):
        flow.tick("landing_sensor")  # the tick dies: its result never reaches Dagster
    store = open_store(get_settings().resolved_database_url, get_settings())
    [batch] = store.ledger.batches()
    assert batch["status"] == "pending" and batch["n_objects"] == 20

    [again] = flow.tick("landing_sensor")  # messages still invisible; the pending batch is requested again
    assert again.run_key == batch["id"]
    time.sleep(1.5)
    assert flow.tick("landing_sensor") == []  # redelivered messages: all recorded already
    assert flow.tick("landing_sensor") == []
    assert sqs.depth() == 0
    assert sorted(_ledger()) == sorted(expected.items())
    assert [b["id"] for b in store.ledger.batches()] == [batch["id"]]


def test_overwrites_delivered_newest_first_record_every_version_once_and_the_newest_wins(events, dagster_instance):
    s3, bucket, sqs = events
    versions = [
        _put(s3, bucket, "notes/o.txt", f"edition {n}: a document about sequencers".encode())[1] for n in (1, 2, 3)
    ]
    bodies = [json.loads(b) for b in sqs.drain() if "Records" in b]
    assert [b["Records"][0]["s3"]["object"]["eTag"] for b in bodies] == versions
    for n, body in enumerate(bodies):  # moto's records lack a sequencer: add S3-style ones, increasing
        body["Records"][0]["s3"]["object"]["sequencer"] = f"0066A1B2C3D4E5F6{n:02X}"
    # newest first, the middle version twice; a removal of another key and an unrelated bucket's event too
    removal = json.loads(json.dumps(bodies[0]))
    removal["Records"][0].update(eventName="ObjectRemoved:Delete")
    removal["Records"][0]["s3"]["object"]["key"] = PREFIX + "notes/never-created.txt"
    foreign = json.loads(json.dumps(bodies[0]))
    foreign["Records"][0]["s3"]["bucket"]["name"] = "some-other-bucket"
    sqs.send([json.dumps(b) for b in (bodies[2], bodies[1], removal, bodies[0], bodies[1], foreign)])

    flow = Flow(dagster_instance)
    [request] = flow.tick("landing_sensor")
    assert request.tags["runtime_ops/objects"] == "3"
    assert request.run_key is not None
    store = open_store(get_settings().resolved_database_url, get_settings())
    recorded = sorted(store.documents.batch_documents(request.run_key), key=lambda d: d["id"])
    assert [d["version"] for d in recorded] == versions  # ledger order = sequencer order: the newest last
    assert flow.run("landing_sensor", request).success
    status = {
        d["version"]: (d["status"], d["quarantine_code"]) for d in store.documents.batch_documents(request.run_key)
    }
    assert status[versions[2]] == ("ok", None)
    assert status[versions[0]] == status[versions[1]] == ("quarantined", "changed")  # overwritten before the read
    assert sqs.depth() == 0
    assert flow.tick("landing_sensor") == []


def test_event_mode_needs_an_s3_landing(env, postgres_url, dagster_instance, tmp_path):
    env(database_url=postgres_url, landing=str(tmp_path / "landing"), RUNTIME_OPS_SQS_QUEUE_URL="http://127.0.0.1:1/q")
    with pytest.raises(Exception, match=r"RUNTIME_OPS_SQS_QUEUE_URL is set .* RUNTIME_OPS_LANDING"):
        Flow(dagster_instance).tick("landing_sensor")


def test_queue_module_is_light_and_its_client_lazy():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from runtime_ops.landing.queue import EventQueue\n"
        "q = EventQueue('https://sqs.eu-west-1.amazonaws.com/123456789012/landing')\n"
        "print(','.join(m for m in ('boto3', 'botocore') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
    assert queue_module.region_from_queue_url("https://sqs.eu-west-1.amazonaws.com/123/q") == "eu-west-1"
    assert queue_module.region_from_queue_url("https://eu-west-2.queue.amazonaws.com/123/q") == "eu-west-2"
    assert queue_module.region_from_queue_url("http://127.0.0.1:5000/123456789012/q") is None
    with pytest.raises(ValueError, match="RUNTIME_OPS_SQS_QUEUE_URL"):
        queue_module.EventQueue("not-a-url")


def test_a_purged_queue_is_reconciled_by_the_listing_sweep_exactly_once(events, dagster_instance, monkeypatch):
    s3, bucket, sqs = events
    monkeypatch.setenv("RUNTIME_OPS_RECONCILE_EVERY", "1s")
    get_settings.cache_clear()
    flow = Flow(dagster_instance)
    sqs.drain()  # moto's TestEvent
    assert flow.tick("landing_sensor") == []  # event mode starts; the first sweep is one period away
    missed = {k: v for k, v in (_put(s3, bucket, f"lost/{i:03d}.txt", f"lost {i}".encode()) for i in range(30))}
    assert len(sqs.drain()) == 30  # the notifications are purged: nothing will announce these objects
    notified = {k: v for k, v in (_put(s3, bucket, f"kept/{i:03d}.txt", f"kept {i}".encode()) for i in range(10))}
    time.sleep(1.1)  # the sweep is due
    requests = flow.tick("landing_sensor") + flow.tick("landing_sensor")
    # The 10 notified objects come from their events, the 30 lost ones from the sweep, each once.
    assert sorted(int(r.tags["runtime_ops/objects"]) for r in requests) == [10, 30]
    ledger = _ledger()
    assert dict(ledger) == {**missed, **notified} and set(Counter(ledger).values()) == {1}

    # Replayed notifications (say, from a dead-letter queue) and the next sweeps add nothing.
    for key, etag in missed.items():
        sqs.send(
            [
                json.dumps(
                    {
                        "Records": [
                            {
                                "eventSource": "aws:s3",
                                "eventName": "ObjectCreated:Put",
                                "s3": {
                                    "bucket": {"name": bucket},
                                    "object": {"key": PREFIX + key, "eTag": etag, "size": 7},
                                },
                            }
                        ]
                    }
                )
            ]
        )
    time.sleep(1.1)
    assert flow.tick("landing_sensor") == [] and flow.tick("landing_sensor") == []
    assert sqs.depth() == 0 and len(_ledger()) == 40
    store = open_store(get_settings().resolved_database_url, get_settings())
    assert sum(b["n_objects"] for b in store.ledger.batches()) == 40
