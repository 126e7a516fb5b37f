"""The example inference pipeline against a local OpenAI-compatible server (`support/labelling_server.py`) that
answers 429 (with Retry-After), 5xx and dropped connections on a schedule and counts calls per ticket: every
ticket is labelled and stored once; a run SIGKILLed mid-way and run again calls the endpoint only for the tickets
without a stored result; publishing waits for the approval gate (`test_labels_are_published_only_after_approval`,
enabled once branch i28-gate's ApprovalGate is merged).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from runtime_ops.http import Backoff
from runtime_ops.inference.client import ChatClassifier
from runtime_ops.inference.costs import Prices
from runtime_ops.inference.labelling import label_tickets
from runtime_ops.inference.tickets import Ticket, parse_ticket_file
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops.store import schema as t
from runtime_ops_tests.support.fault_server import reset, slow, status
from runtime_ops_tests.support.labelling_server import LABELS, LabellingServer, expected_label, ok

pytestmark = pytest.mark.slow(seconds=40)  # two subprocesses load the code location; 34-61 s on a busy 2-core machine

SHIPPED = Path(__file__).resolve().parents[2] / "runtime_ops" / "demo" / "tickets"
FAST = Backoff(base_s=0.05, factor=2.0, max_delay_s=1.0, max_attempts=6, jitter="full", max_total_s=20.0)
API_KEY = "sk-test-inference-NOT-A-REAL-KEY-9d2e"


def shipped_tickets() -> list[Ticket]:
    tickets = []
    for path in sorted(SHIPPED.glob("*.jsonl")):
        found, refused = parse_ticket_file(path.name, path.read_bytes(), LABELS)
        assert refused == []
        tickets += found
    return tickets


@pytest.fixture(scope="module")
def server() -> Iterator[LabellingServer]:
    with LabellingServer() as srv:
        yield srv


@pytest.fixture
def labelling_server(server: LabellingServer) -> LabellingServer:
    server.clear()
    server.default = ok()
    return server


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_migration_0023_creates_the_results_table_as_declared_and_goes_back(db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import inspect

    from runtime_ops.store.migrate import current_revision, downgrade, upgrade

    store = open_store(db_url, get_settings(), pipeline="tickets")
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
    assert [d for d in diffs if "inference_results" in repr(d)] == []
    row = {"item_id": "T-1", "input_digest": "d" * 64, "model": "m", "output": "bug", "label": "bug"}
    row |= {"prompt_tokens": 10, "completion_tokens": 1, "cost_usd": 0.001, "run_id": None}
    assert store.inference.record(row) is True
    assert store.inference.record({**row, "label": "billing"}) is False  # once per key: the first answer stays
    assert store.scoped("other").inference.found("m", [("T-1", "d" * 64)]) == {}  # per pipeline
    assert store.inference.found("m", [("T-1", "d" * 64)])[("T-1", "d" * 64)]["label"] == "bug"
    downgrade(store.engine, get_settings(), "0021")
    assert current_revision(store.engine) == "0021"
    assert "inference_results" not in inspect(store.engine).get_table_names()
    upgrade(store.engine, get_settings())
    assert store.inference.count() == 0
    store.engine.dispose()


def test_every_ticket_is_labelled_and_stored_once_through_429s_5xx_and_resets(
    postgres_url: str, labelling_server: LabellingServer
) -> None:
    server = labelling_server
    tickets = shipped_tickets()
    server.push(
        status(429, retry_after=0.3), status(500), status(503), reset(), status(429, retry_after=0.1), status(502)
    )
    results = open_store(postgres_url, get_settings(), pipeline="tickets").inference
    prices = Prices(prompt_per_1k=0.15, completion_per_1k=0.6)
    with ChatClassifier(server.base_url, model="test-model", api_key=API_KEY, backoff=FAST) as model:
        labelling = label_tickets(
            tickets, labels=LABELS, classifier=model, prices=prices, results=results, concurrency=4, run_id="r1"
        )

    ids = [ticket.id for ticket in tickets]
    assert server.answered_per_item() == dict.fromkeys(ids, 1)  # each ticket answered once...
    calls = server.calls_per_item()
    assert sum(calls.values()) == len(ids) + 6 and max(calls.values()) >= 2  # ...after six failed attempts in all
    assert server.max_in_flight <= 4  # the concurrency cap
    assert results.count() == len(ids) and labelling.called == len(ids) and labelling.reused == 0
    assert [i.label for i in labelling.items] == [expected_label(ticket.text) for ticket in tickets]
    # Retry-After was honoured: the ticket refused with 0.3 s waited at least that long before asking again.
    first = server.requests[0]
    again = next(
        r
        for r in server.requests[1:]
        if r.headers.get("X-Client-Request-Id") == first.headers.get("X-Client-Request-Id")
    )
    assert again.arrived - first.arrived >= 0.3
    # Tokens and cost are the server's usage times the prices.
    served = [r for r in server.requests if r.behaviour == "ok"]
    prompt = sum(sum(len(m["content"].split()) for m in r.body["messages"]) for r in served)
    assert sum(i.usage.prompt_tokens for i in labelling.items) == prompt
    assert sum(i.cost_usd for i in labelling.items) == pytest.approx(prompt / 1000 * 0.15 + len(ids) / 1000 * 0.6)
    assert all(r.headers.get("Authorization") == f"Bearer {API_KEY}" for r in server.requests)

    # Labelling the same tickets again reuses every stored answer: nothing is sent.
    server.clear()
    with ChatClassifier(server.base_url, model="test-model", backoff=FAST) as model:
        again_labelled = label_tickets(
            tickets, labels=LABELS, classifier=model, prices=prices, results=results, concurrency=4
        )
    assert server.requests == [] and again_labelled.reused == len(ids)
    assert [i.label for i in again_labelled.items] == [i.label for i in labelling.items]


WORKER = """
import sys
import dagster as dg
from runtime_ops.definitions import defs

result = defs.get_job_def("tickets__label_job").execute_in_process(
    instance=dg.DagsterInstance.ephemeral(), raise_on_error=False
)
sys.exit(0 if result.success else 1)
"""


def _start_run(log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-c", WORKER], stdout=out, stderr=subprocess.STDOUT)


def _stored(url: str) -> set[str]:
    store = open_store(url, get_settings(), pipeline="tickets")
    rows = store.inference.fetch(select(t.inference_results.c.item_id))
    store.engine.dispose()
    return {row[0] for row in rows}


def test_a_run_killed_mid_way_and_run_again_calls_the_endpoint_only_for_the_tickets_without_a_result(
    env, postgres_url: str, labelling_server: LabellingServer, tmp_path: Path
) -> None:
    server = labelling_server
    server.default = slow(0.15)  # calls stay in flight long enough to kill the run among them
    home = env(
        database_url=postgres_url, RUNTIME_OPS_INFERENCE_URL=server.base_url, RUNTIME_OPS_INFERENCE_API_KEY=API_KEY
    )
    landing = home / "tickets" / "landing"
    landing.mkdir(parents=True)
    for path in SHIPPED.glob("*.jsonl"):
        (landing / path.name).write_bytes(path.read_bytes())
    ids = {ticket.id for ticket in shipped_tickets()}
    log = tmp_path / "runs.log"

    run = _start_run(log)
    deadline = time.monotonic() + 90
    while len(_stored(postgres_url)) < 12:
        assert run.poll() is None, f"the run ended before it was killed:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "the run stored fewer than 12 results in 90 s"
        time.sleep(0.02)
    os.kill(run.pid, signal.SIGKILL)
    assert run.wait(timeout=30) == -signal.SIGKILL
    stored = _stored(postgres_url)
    assert 12 <= len(stored) < len(ids)
    before = server.calls_per_item()

    retry = _start_run(log)
    assert retry.wait(timeout=120) == 0, log.read_text()[-3000:]
    called_again = server.calls_per_item() - before
    assert set(called_again) == ids - stored  # only the tickets without a stored result...
    assert set(called_again.values()) == {1}  # ...each once
    assert _stored(postgres_url) == ids
    label_sets = list((home / "tickets" / "output" / "label_sets").glob("*.jsonl"))
    assert len(label_sets) == 1
    published = [json.loads(line) for line in label_sets[0].read_text().splitlines()]
    assert {row["id"] for row in published} == ids and {row["model"] for row in published} == {"gpt-4o-mini"}
    assert API_KEY not in log.read_text()  # the key is sent, never logged
    assert all(r.headers.get("Authorization") == f"Bearer {API_KEY}" for r in server.requests)


def test_labels_are_published_only_after_approval(env, postgres_url: str, dagster_instance) -> None:
    import dagster as dg

    from runtime_ops.decisions.decide import decide
    from runtime_ops.definitions import build_definitions

    home = env(database_url=postgres_url)  # no endpoint: the stand-in model (accuracy 0.91 < 0.92: a person decides)
    landing = home / "tickets" / "landing"
    landing.mkdir(parents=True)
    for path in SHIPPED.glob("*.jsonl"):
        (landing / path.name).write_bytes(path.read_bytes())
    defs = build_definitions(get_settings())
    published_key = dg.AssetKey(["tickets", "published_labels"])
    published_file = home / "tickets" / "output" / "published" / "labels.jsonl"

    labelled = defs.resolve_job_def("tickets__label_job").execute_in_process(instance=dagster_instance)
    assert labelled.success  # pending is a warning, not a failed run
    [check] = labelled.get_asset_check_evaluations()
    assert check.check_name == "approval" and not check.passed and check.severity == dg.AssetCheckSeverity.WARN

    # Materializing the downstream asset alone (the check skipped) still refuses: nothing is published.
    refused = dg.materialize(
        [defs.get_assets_def(published_key)],
        instance=dagster_instance,
        resources=defs.resources,
        raise_on_error=False,
        selection=[published_key],
    )
    assert not refused.success and not published_file.exists()

    store = open_store(postgres_url, get_settings(), pipeline=None)
    query = select(t.approval_requests).where(t.approval_requests.c.target == "tickets/ticket_labels")
    [request] = [dict(row._mapping) for row in store.requests.fetch(query)]
    assert request["status"] == "pending" and request["evidence"]["labelled"] == 22
    decide(
        store.scoped(request["pipeline"]),
        request["id"],
        actor="U024BE7LH",
        vote="approve",
        channel="cli",
        now=request["created_at"],
    )

    # The gate's sensor turns the approval into one run of published_labels, which publishes the approved set.
    repository = defs.get_repository_def()
    sensor = repository.get_sensor_def("tickets__ticket_labels__approval_sensor")
    context = dg.build_sensor_context(instance=dagster_instance, definitions=defs, resources=defs.resources)
    requests = sensor.evaluate_tick(context).run_requests or []
    assert [r.run_key for r in requests] == [request["id"]]
    job = repository.get_job(requests[0].job_name or "")
    assert job.execute_in_process(instance=dagster_instance, tags=requests[0].tags).success
    rows = [json.loads(line) for line in published_file.read_text().splitlines()]
    assert len(rows) == 40 and {r["model"] for r in rows} == {"local-deterministic-stand-in"}
    [materialization] = labelled.asset_materializations_for_node("tickets__ticket_labels")
    label_set = home / "tickets" / "output" / str(materialization.metadata["label_set"].value)
    assert published_file.read_bytes() == label_set.read_bytes()

    # A ticket changes: the new label set is not covered by that approval, and publishing refuses until it is.
    (landing / "extra.txt").write_text("The invoice PDF is blank.")
    relabelled = defs.resolve_job_def("tickets__label_job").execute_in_process(instance=dagster_instance)
    assert relabelled.success and not relabelled.get_asset_check_evaluations()[0].passed
    again = dg.materialize(
        [defs.get_assets_def(published_key)],
        instance=dagster_instance,
        resources=defs.resources,
        raise_on_error=False,
        selection=[published_key],
    )
    assert not again.success and published_file.read_bytes() == label_set.read_bytes()


def test_the_landing_sensor_starts_one_run_per_state_of_the_ticket_files(tmp_path: Path) -> None:
    import dagster as dg

    from runtime_ops.inference.assets import build_inference_defs
    from runtime_ops.inference.spec import InferenceSpec
    from runtime_ops.resources.landing import LandingResource

    landing = tmp_path / "landing"
    landing.mkdir()
    spec = InferenceSpec("tickets", str(landing), str(tmp_path / "out"), LABELS, "m", Prices(), 2, 5.0, None, 1)
    [sensor] = build_inference_defs(spec, lambda context, target: {}).sensors or []
    assert isinstance(sensor, dg.SensorDefinition)

    # The sensor reads only the landing and its cursor: an in-memory instance will do (a persistent one per tick
    # costs seconds).
    instance = dg.DagsterInstance.ephemeral()

    def tick(cursor: str | None) -> tuple[list[dg.RunRequest], str | None]:
        context = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"landing": LandingResource()})
        result = sensor.evaluate_tick(context)
        return list(result.run_requests or []), result.cursor

    requests, cursor = tick(None)
    assert requests == []  # an empty landing: nothing to label
    (landing / "a.jsonl").write_text('{"id": "T-1", "text": "charged twice"}\n')
    (landing / "notes.md").write_text("not a ticket file")
    requests, cursor = tick(cursor)
    assert len(requests) == 1 and (requests[0].run_key or "").startswith("tickets:")
    first_key = requests[0].run_key
    assert tick(cursor)[0] == []  # nothing changed: no run
    assert tick(None)[0][0].run_key == first_key  # the same state evaluated again: the same run key (deduped)
    (landing / "notes.md").write_text("still not a ticket file, changed")
    assert tick(cursor)[0] == []  # only ticket files count
    (landing / "a.jsonl").write_text('{"id": "T-1", "text": "charged twice"}\n{"id": "T-2", "text": "crash"}\n')
    requests, _ = tick(cursor)
    assert len(requests) == 1 and requests[0].run_key != first_key


def test_tickets_landed_in_s3_are_labelled_and_the_approved_set_published_there(env, s3_bucket, tmp_path: Path) -> None:
    import dagster as dg

    from runtime_ops.definitions import build_resources
    from runtime_ops.inference.assets import build_inference_defs
    from runtime_ops.inference.spec import InferenceSpec

    client, bucket = s3_bucket
    env(AWS_ENDPOINT_URL=os.environ["AWS_ENDPOINT_URL"])
    for path in SHIPPED.glob("*.jsonl"):
        client.put_object(Bucket=bucket, Key=f"in/{path.name}", Body=path.read_bytes())
    client.put_object(Bucket=bucket, Key="in/bad.jsonl", Body=b'{"id": "T-1001", "text": "again"}\nnot json\n')
    spec = InferenceSpec("tickets", f"s3://{bucket}/in", f"s3://{bucket}/out", LABELS, "m", Prices(), 4, 5.0, None, 1)
    approvals: list[str] = []

    def approved(context: dg.AssetExecutionContext, target: dg.AssetKey) -> dict[str, str]:
        approvals.append(target.to_user_string())  # the gate's verdict is the gate's test; here: "approved"
        return {"id": "apr_test"}

    defs = build_inference_defs(spec, approved)
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    with dg.instance_for_test() as instance:
        result = dg.materialize(assets, instance=instance, resources=build_resources(get_settings()))
    assert result.success and approvals == ["tickets/ticket_labels"]
    [labels] = result.asset_materializations_for_node("tickets__ticket_labels")
    metadata = {name: value.value for name, value in labels.metadata.items()}
    assert metadata["items"] == 40 and metadata["refused"] == 2  # a repeated id and a line that is not JSON
    assert metadata["model"] == "local-deterministic-stand-in" and metadata["cost_usd"] == 0.0
    label_set = client.get_object(Bucket=bucket, Key=f"out/{metadata['label_set']}")["Body"].read()
    published = client.get_object(Bucket=bucket, Key="out/published/labels.jsonl")["Body"].read()
    assert published == label_set and len(published.splitlines()) == 40
