"""The landing sensor on a local folder and on S3 (moto's HTTP server), against real PostgreSQL storage."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import cast

import pytest

from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.flow import Flow


class Local:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.uri = str(root)

    def put(self, key: str, data: bytes, mtime: float | None = None) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if mtime is not None:
            os.utime(path, (mtime, mtime))

    def delete(self, key: str) -> None:
        (self.root / key).unlink()


class S3:
    def __init__(self, client, bucket: str) -> None:  # type: ignore[no-untyped-def]
        self.client, self.bucket = client, bucket
        self.uri = f"s3://{bucket}/incoming"

    def put(self, key: str, data: bytes, mtime: float | None = None) -> None:
        self.client.put_object(Bucket=self.bucket, Key=f"incoming/{key}", Body=data)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=f"incoming/{key}")


@pytest.fixture(params=["local", "s3"])
def landing(request, tmp_path):  # type: ignore[no-untyped-def]
    if request.param == "local":
        return Local(tmp_path / "landing")
    client, bucket = request.getfixturevalue("s3_bucket")
    return S3(client, bucket)


def _ledger(store) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return sorted(
        (d["key"], d["status"])
        for s in ("ok", "superseded", "quarantined")
        for d in store.documents.documents_by_status(s)
    )


def test_same_second_and_overwrite_each_ingested_once_per_version(env, postgres_url, dagster_instance, landing):
    env(database_url=postgres_url, landing=landing.uri, AWS_ENDPOINT_URL=os.environ.get("AWS_ENDPOINT_URL"))
    flow = Flow(dagster_instance)
    store = open_store(get_settings().resolved_database_url, get_settings())
    now = time.time()
    landing.put("notes/a.txt", b"alpha document about queues and retries", mtime=now)
    landing.put("notes/b.md", b"# Beta\n\nbeta document about locks and fencing", mtime=now)

    [request] = flow.tick("landing_sensor")
    assert request.run_key == request.partition_key  # run key = batch id
    assert request.tags["runtime_ops/objects"] == "2"
    assert flow.run("landing_sensor", request).success
    assert _ledger(store) == [("notes/a.txt", "ok"), ("notes/b.md", "ok")]

    assert flow.tick("landing_sensor") == []  # a repeated tick launches nothing
    assert flow.tick("landing_sensor") == []

    landing.put("notes/a.txt", b"alpha document, second edition, now about backoff", mtime=now + 5)
    [again] = flow.tick("landing_sensor")
    assert again.tags["runtime_ops/objects"] == "1"
    assert flow.run("landing_sensor", again).success
    assert _ledger(store) == [("notes/a.txt", "ok"), ("notes/a.txt", "superseded"), ("notes/b.md", "ok")]
    texts = [t for _, _, t in store.documents.current_chunks()]
    assert any("second edition" in t for t in texts) and not any(t.startswith("alpha document about") for t in texts)

    assert flow.tick("landing_sensor") == []
    batches = store.ledger.batches()
    assert [b["n_objects"] for b in batches] == [2, 1]
    assert {b["status"] for b in batches} == {"ingested"}
    parts = dagster_instance.get_dynamic_partitions("demo__landing_batches")
    assert sorted(parts) == sorted(b["id"] for b in batches)  # one partition per batch, not per file


def test_batch_recorded_but_not_launched_is_requested_again(env, postgres_url, dagster_instance, tmp_path):
    landing = Local(tmp_path / "landing")
    env(database_url=postgres_url, landing=landing.uri)
    flow = Flow(dagster_instance)
    landing.put("x.txt", b"a document that lands while the daemon crashes")
    [lost] = flow.tick("landing_sensor")  # the tick's result never reaches a run (daemon died)
    flow.launched_keys.clear()
    flow.cursors.clear()
    [again] = flow.tick("landing_sensor")
    assert again.run_key == lost.run_key  # same batch, same run key: the daemon launches it at most once
    assert flow.run("landing_sensor", again).success
    assert flow.tick("landing_sensor") == []


def test_batches_are_bounded(env, postgres_url, dagster_instance, tmp_path):
    landing = Local(tmp_path / "landing")
    env(database_url=postgres_url, landing=landing.uri, RUNTIME_OPS_BATCH_MAX_OBJECTS="3")
    flow = Flow(dagster_instance)
    for i in range(7):
        landing.put(f"doc{i}.txt", f"document number {i}".encode())
    sizes = []
    for _ in range(4):
        sizes += [int(r.tags["runtime_ops/objects"]) for r in flow.tick("landing_sensor")]
    assert sizes == [3, 3, 1]


def test_bad_files_are_quarantined_and_the_rest_ingested(env, postgres_url, dagster_instance, tmp_path):
    from runtime_ops.demo.pdf import minimal_pdf

    landing = Local(tmp_path / "landing")
    env(database_url=postgres_url, landing=landing.uri)
    flow = Flow(dagster_instance)
    landing.put("good/readme.md", b"# Guide\n\nA perfectly good markdown document about retries.")
    landing.put("good/report.pdf", minimal_pdf(["A PDF page about exponential backoff."]))
    landing.put("bad/broken.pdf", minimal_pdf(["truncated"])[:60])
    landing.put("bad/empty.txt", b"")
    landing.put("bad/latin1.txt", "caf\xe9 cr\xe8me".encode("latin-1"))
    [request] = flow.tick("landing_sensor")
    result = flow.run("landing_sensor", request)
    assert result.success
    store = open_store(get_settings().resolved_database_url, get_settings())
    quarantined = {
        d["key"]: (d["quarantine_code"], d["reason"]) for d in store.documents.documents_by_status("quarantined")
    }
    assert set(quarantined) == {"bad/broken.pdf", "bad/empty.txt", "bad/latin1.txt"}
    assert quarantined["bad/broken.pdf"][0] == "corrupt"
    assert quarantined["bad/empty.txt"][0] == "empty"
    assert quarantined["bad/latin1.txt"][0] == "not_utf8" and "UTF-8" in quarantined["bad/latin1.txt"][1]
    assert all(reason for _, reason in quarantined.values())
    assert {d["key"] for d in store.documents.documents_by_status("ok")} == {"good/readme.md", "good/report.pdf"}
    meta = result.asset_materializations_for_node("demo__raw_documents")[0].metadata
    assert meta["quarantined"].value == 3 and "bad/latin1.txt" in cast(str, meta["quarantine"].value)
    # The corpus carries on: the good documents are chunked and searchable.
    assert {k for _, k, _ in store.documents.current_chunks()} == {"good/readme.md", "good/report.pdf"}


def test_objects_deleted_from_the_landing_leave_the_corpus_once_their_range_is_listed(
    env, postgres_url, dagster_instance, landing
):  # type: ignore[no-untyped-def]
    """Listing mode is also a sweep: a current document whose key the listing no longer has leaves the corpus
    (status deleted, a `remove` in the change feed); keys a scan has not reached yet are never judged."""
    env(
        database_url=postgres_url,
        landing=landing.uri,
        AWS_ENDPOINT_URL=os.environ.get("AWS_ENDPOINT_URL"),
        RUNTIME_OPS_BATCH_MAX_OBJECTS="2",
    )
    flow = Flow(dagster_instance)
    store = open_store(get_settings().resolved_database_url, get_settings()).scoped("demo")
    for key in ("a/1.txt", "a/2.txt", "b/3.txt", "c/4.txt", "d/5.txt"):
        landing.put(key, f"the document {key} about sweeps".encode())
    while runs := flow.tick_and_run("landing_sensor"):
        assert all(r.success for r in runs)
    assert len(store.documents.documents_by_status("ok")) == 5
    head = store.changes.head()

    landing.delete("a/2.txt")
    landing.delete("d/5.txt")
    landing.put("b/6.txt", b"a new document")  # the batch fills up (2) only once the scan is past b/
    landing.put("b/7.txt", b"another new document")
    [first] = flow.tick("landing_sensor")  # listed a/1 .. b/7, stopped there: a/2 is gone, d/5 not reached yet
    assert first.tags["runtime_ops/objects"] == "2"
    deleted = [d["key"] for d in store.documents.documents_by_status("deleted")]
    assert deleted == ["a/2.txt"]
    while flow.tick_and_run("landing_sensor"):  # the rest of the listing, to its end: d/5 goes too
        pass
    assert sorted(d["key"] for d in store.documents.documents_by_status("deleted")) == ["a/2.txt", "d/5.txt"]
    removed = [c for c in store.changes.since(head) if c.op == "remove"]
    assert len(removed) == 2
    assert flow.tick("landing_sensor") == [] and len(store.documents.documents_by_status("deleted")) == 2


def _failed_for_good(flow: Flow, request) -> str:  # type: ignore[no-untyped-def]
    """A run of `request` that failed and that Dagster will not retry (a launch the code server never took)."""
    import dagster as dg

    run = flow.instance.create_run_for_job(
        job_def=flow.job_for("landing_sensor", request),
        tags={**request.tags, "dagster/run_key": request.run_key, "dagster/will_retry": "false"},
        status=dg.DagsterRunStatus.FAILURE,
    )
    return run.run_id


def test_a_batch_whose_run_failed_for_good_is_launched_again_then_given_up_loudly(
    env, postgres_url, dagster_instance, tmp_path, capfd
):
    """Found by the soak: an ingest run that could not be launched (its code server was being restarted) failed,
    Dagster does not retry such a run, and its batch stayed `launched` for ever, its documents never ingested."""
    landing = Local(tmp_path / "landing")
    env(database_url=postgres_url, landing=landing.uri)
    store = open_store(get_settings().resolved_database_url, get_settings())
    flow = Flow(dagster_instance)
    landing.put("x.txt", b"a document whose first ingestion never started")
    [first] = flow.tick("landing_sensor")
    _failed_for_good(flow, first)
    [second] = flow.tick("landing_sensor")  # marks the batch launched, sees its run failed, launches again
    assert (second.partition_key, second.run_key) == (first.partition_key, f"{first.run_key}:launch2")
    assert second.tags["runtime_ops/batch_id"] == first.partition_key
    assert flow.run("landing_sensor", second).success
    assert [b["status"] for b in store.ledger.batches()] == ["ingested"]
    assert [d["key"] for d in store.documents.documents_by_status("ok")] == ["x.txt"]
    assert flow.tick("landing_sensor") == []

    landing.put("y.txt", b"a document whose ingestion keeps failing")
    [one] = flow.tick("landing_sensor")
    _failed_for_good(flow, one)
    [two] = flow.tick("landing_sensor")
    _failed_for_good(flow, two)
    [three] = flow.tick("landing_sensor")
    assert three.run_key == f"{one.run_key}:launch3"
    last = _failed_for_good(flow, three)
    assert flow.tick("landing_sensor") == []  # three launches: given up, and said so
    batch = store.ledger.get_batch(str(one.partition_key))
    assert batch is not None and (batch["status"], batch["run_id"]) == ("failed", last)
    said = capfd.readouterr().err
    assert f"landing batch {one.partition_key}: its ingestion failed 3 times (last run {last}); marked failed" in said
    assert "then re-execute that run" in said
    assert flow.tick("landing_sensor") == []


def test_new_objects_wait_while_a_batch_waits_in_the_run_queue_then_join_one_batch(
    env, postgres_url, dagster_instance, tmp_path
):
    """Found by the soak: objects landing faster than ingest runs start made one small batch, and one more queued
    run, per sensor tick; the run queue grew for as long as the landing kept up its pace."""
    import dagster as dg

    landing = Local(tmp_path / "landing")
    env(database_url=postgres_url, landing=landing.uri)
    flow = Flow(dagster_instance)
    landing.put("a.txt", b"the first document")
    [first] = flow.tick("landing_sensor")
    job = flow.job_for("landing_sensor", first)
    tags = {**first.tags, "dagster/run_key": first.run_key}
    # Created, not started: a run waiting for the run queue to launch it. (A QUEUED one must name a code location
    # origin, which this in-process test has none of; the sensor treats the two alike.)
    dagster_instance.create_run_for_job(job_def=job, tags=tags, status=dg.DagsterRunStatus.NOT_STARTED)
    for name in ("b.txt", "c.txt"):
        landing.put(name, f"{name} lands while the first batch waits for a run slot".encode())
        assert flow.tick("landing_sensor") == []  # held back: no second batch behind a queued run
    dagster_instance.create_run_for_job(job_def=job, tags=tags, status=dg.DagsterRunStatus.STARTED)
    [second] = flow.tick("landing_sensor")  # the run left the queue: what waited is one batch
    assert second.tags["runtime_ops/objects"] == "2"
    store = open_store(get_settings().resolved_database_url, get_settings())
    assert [b["n_objects"] for b in store.ledger.batches()] == [1, 2]
