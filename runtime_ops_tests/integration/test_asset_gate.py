"""The approval gate on any asset (`ApprovalGate`), as another Dagster project uses it: a small project of its own
(a `target` asset with accuracy/labelled/cost_usd metadata, a downstream `published` asset calling
`require_approval`) whose `defs.yaml` declares the gate, loaded with `dg.load_from_defs_folder`, on a Dagster
instance and a state store on the test PostgreSQL, decided through the real ops API (uvicorn), a local Slack server,
signed links and the CLI."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest

from runtime_ops import clock
from runtime_ops.cli import main as cli
from runtime_ops.components import approval_gate
from runtime_ops.components.loading import PipelineConfigError
from runtime_ops.definitions import build_definitions
from runtime_ops.settings import load_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer, FakeClock, operator_cli
from runtime_ops_tests.support.flow import Flow
from runtime_ops_tests.support.own_corpus import declare_pipeline
from runtime_ops_tests.support.servers import free_port
from runtime_ops_tests.support.slack_server import SlackServer
from runtime_ops_tests.support.slack_signing import interaction_body, sign

SECRET = "5e1f0c2a9b8d7e6f5a4b3c2d1e0f9a8b"
CHANNEL = "C0ML"
GATE = "scoring__ticket_labels"
SENSOR = f"{GATE}__approval_sensor"
TARGET = dg.AssetKey(["scoring", "ticket_labels"])
PUBLISHED = dg.AssetKey(["scoring", "published_labels"])
CHECK = dg.AssetCheckKey(TARGET, "approval")

ASSETS = """
import dagster as dg
from runtime_ops.components import require_approval

TARGET = dg.AssetKey(["scoring", "ticket_labels"])


@dg.asset(key=TARGET)
def ticket_labels(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    # The run's tags stand in for a labelling run's outcome.
    accuracy = float(context.run.tags.get("accuracy", "0.85"))
    return dg.MaterializeResult(metadata={"accuracy": accuracy, "labelled": 120, "cost_usd": 12.5})


@dg.asset(key=["scoring", "published_labels"], deps=[TARGET])
def published_labels(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    request = require_approval(context, TARGET)
    return dg.MaterializeResult(metadata={"approval_id": request["id"]})


DAYS = dg.StaticPartitionsDefinition(["2026-12-01", "2026-12-02"])
DAILY = dg.AssetKey(["scoring", "daily_summaries"])


@dg.asset(key=DAILY, partitions_def=DAYS)
def daily_summaries(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"summaries": 40, "day": context.partition_key})


@dg.asset(key=["scoring", "daily_published"], deps=[DAILY], partitions_def=DAYS)
def daily_published(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    request = require_approval(context, DAILY, context.partition_key)
    return dg.MaterializeResult(metadata={"approval_id": request["id"]})
"""

# A second gate in the same project, on a partitioned asset: one request per partition.
DAILY_GATE_YAML = """
type: runtime_ops.components.ApprovalGate
attributes:
  target: scoring/daily_summaries
  evidence: [summaries]
  approvers: [U1]
  on_approval: {materialize: [scoring/daily_published]}
"""
DAILY = dg.AssetKey(["scoring", "daily_summaries"])
DAILY_PUBLISHED = dg.AssetKey(["scoring", "daily_published"])

GATE_YAML = f"""
type: runtime_ops.components.ApprovalGate
attributes:
  target: scoring/ticket_labels
  evidence: [accuracy, labelled, cost_usd]
  auto_approve: "accuracy >= 0.92 and cost_usd < 50"
  approvers: [U1, U2, U3]
  required_approvals: 2
  escalation: [{{approvers: [U9], after: 4h}}]
  expire_after: 24h
  slack_channel: {CHANNEL}
  on_approval: {{materialize: [scoring/published_labels]}}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The other project's folder (its own pyproject.toml, package and defs), on sys.path for this module."""
    root = tmp_path_factory.mktemp("gated_project")
    package = root / "gated_project"
    (package / "defs" / "labels_gate").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "gated-project"\nversion = "0.1.0"\ndependencies = ["runtime-ops"]\n\n'
        '[tool.dg]\ndirectory_type = "project"\n\n[tool.dg.project]\nroot_module = "gated_project"\n'
    )
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (package / "defs" / "assets.py").write_text(ASSETS)
    (package / "defs" / "labels_gate" / "defs.yaml").write_text(GATE_YAML)
    (package / "defs" / "daily_gate").mkdir()
    (package / "defs" / "daily_gate" / "defs.yaml").write_text(DAILY_GATE_YAML)
    sys.path.insert(0, str(root))
    yield package / "defs"
    sys.path.remove(str(root))
    for name in [m for m in sys.modules if m.startswith("gated_project")]:
        del sys.modules[name]


@dataclass
class Gated:
    flow: Flow
    store: StateStore
    slack: SlackServer
    api: ApiServer
    clock: FakeClock
    clicks: int = 0

    def materialize(
        self, accuracy: float = 0.85, user: str | None = None
    ) -> tuple[dg.ExecuteInProcessResult, dict[str, Any]]:
        """The target with its check, in one run (launched by `user`, as Dagster+ tags it); (the run, the check's
        result metadata as plain values)."""
        tags = {"accuracy": str(accuracy), **({"dagster/user": user} if user else {})}
        run = self.flow.materialize([TARGET], tags=tags)
        [evaluation] = run.get_asset_check_evaluations()
        return run, {**{k: v.value for k, v in evaluation.metadata.items()}, "_evaluation": evaluation}

    def without_check(self, accuracy: float = 0.85) -> dg.ExecuteInProcessResult:
        """The target alone, its check skipped (as a run selecting only the asset does)."""
        target = self.flow.defs.resolve_assets_def(TARGET)
        return dg.materialize([target], instance=self.flow.instance, tags={"accuracy": str(accuracy)})

    def check_only(self) -> dg.AssetCheckEvaluation:
        """The gate's check run on its own against the latest materialization."""
        parts = [self.flow.defs.resolve_assets_def(TARGET), *(self.flow.defs.asset_checks or [])]
        run = dg.materialize(parts, instance=self.flow.instance, selection=dg.AssetSelection.checks(CHECK),
                             resources=self.flow.defs.resources, raise_on_error=False)  # fmt: skip
        [evaluation] = run.get_asset_check_evaluations()
        return evaluation

    def tick(self) -> list[dg.ExecuteInProcessResult]:
        return self.flow.tick_and_run(SENSOR)

    def request(self, request_id: str) -> dict[str, Any]:
        found = self.store.requests.get_request(request_id)
        assert found is not None
        return found

    def click(self, request_id: str, user: str) -> httpx.Response:
        [ts] = [ts for ts, m in self.slack.messages.items() if request_id in str(m)]
        self.clicks += 1
        body = interaction_body(
            request_id, "approve", user, message_ts=ts, action_ts=f"1700000000.{self.clicks:06d}",
            channel_id=CHANNEL, response_url=self.slack.response_url(f"click{self.clicks}"),
        )  # fmt: skip
        headers = {"content-type": "application/x-www-form-urlencoded",
                   **sign(SECRET, body, int(self.clock.now().timestamp()))}  # fmt: skip
        return web.post(f"{self.api.url}/slack/interactions", content=body, headers=headers, timeout=10)

    def link(self, request_id: str, user: str) -> httpx.Response:
        [text] = [e["text"] for e in self.slack.ephemerals if e["user"] == user and request_id in e["text"]]
        url = text[text.index(f"{self.api.url}/approvals/") :].split()[0].rstrip(">")
        page = web.get(url, timeout=10).text  # the page names the target and shows its evidence
        assert "Approve scoring/ticket_labels?" in page and "<td>cost_usd</td><td>12.5</td>" in page
        return web.post(url, data={"action": "approve"}, timeout=10)

    def api_approve(self, request_id: str, user: str) -> httpx.Response:
        key = self.store.api_keys.create(f"operator {user}", ["decide"], approver=user).key
        return web.post(f"{self.api.url}/api/approvals/{request_id}/approve", json={},
                          headers={"Authorization": f"Bearer {key}"}, timeout=10)  # fmt: skip

    def published_runs(self) -> list[str]:
        records = self.flow.instance.fetch_materializations(PUBLISHED, limit=100).records
        return [str(r.asset_materialization.metadata["approval_id"].value) for r in records if r.asset_materialization]


@pytest.fixture
def gated(project: Path, env, postgres_url, dagster_instance, monkeypatch) -> Iterator[Gated]:  # type: ignore[no-untyped-def]
    port = free_port()
    fake = FakeClock()
    monkeypatch.setattr(clock, "now", fake.now)  # the sensor's deadlines and the API's clock move together
    with SlackServer() as slack:
        env(
            database_url=postgres_url,
            SLACK_BOT_TOKEN="xoxb-test-token",
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_APPROVAL_CHANNEL="C0DEFAULT",  # the gate's own slack_channel wins
            RUNTIME_OPS_APPROVERS="U8",  # the runtime_ops demo pipeline's, which the ops API also loads
            SLACK_API_URL=slack.base_url,
            SLACK_HOOKS_URL=slack.url,
            RUNTIME_OPS_PUBLIC_URL=f"http://127.0.0.1:{port}",
        )
        settings = load_settings()
        defs = dg.load_from_defs_folder(path_within_project=project)
        store = open_store(settings.resolved_database_url, settings, pipeline=None)
        api = ApiServer(settings, fake, port=port)
        with api:
            yield Gated(Flow(dagster_instance, defs=defs), store, slack, api, fake)


def _decided(gated: Gated, meta: dict[str, Any]) -> str:
    """The decided request's id, after its run of on_approval published the target once, and not again."""
    request_id = str(meta["approval_id"])
    assert gated.request(request_id)["status"] == "approved"
    [run] = gated.tick()
    assert run.success and gated.published_runs().count(request_id) == 1
    # The decision is recorded as the check's passed result on the materialization it approved.
    latest = gated.flow.instance.event_log_storage.get_latest_asset_check_execution_by_key([CHECK])[CHECK]
    evaluation = latest.event.dagster_event.event_specific_data if latest.event and latest.event.dagster_event else None
    assert isinstance(evaluation, dg.AssetCheckEvaluation) and evaluation.passed
    assert evaluation.metadata["approval_id"].value == request_id or gated.request(request_id)["kind"] == "policy"
    assert run.dagster_run.tags["runtime_ops/approval_id"] == request_id
    assert gated.tick() == []  # a second tick launches nothing more
    return request_id


def test_a_gate_declared_in_yaml_waits_decides_by_every_channel_and_fails_closed(
    gated: Gated, capsys: pytest.CaptureFixture[str]
) -> None:
    # Pending is a warning, not a failure: the run succeeds, the request names the target and its evidence.
    run, meta = gated.materialize(user="U1")
    assert run.success and meta["status"] == "pending"
    assert meta["_evaluation"].severity == dg.AssetCheckSeverity.WARN and not meta["_evaluation"].passed
    assert "accuracy 0.85 >= 0.92 does not hold" in meta["auto_approve"]
    first = gated.request(str(meta["approval_id"]))
    assert first["target"] == "scoring/ticket_labels" and first["pipeline"] == GATE
    assert first["evidence"] == {"accuracy": 0.85, "labelled": 120, "cost_usd": 12.5}
    assert gated.tick() == []  # announced, nothing approved yet
    [message] = [m for m in gated.slack.messages.values() if first["id"] in str(m)]
    assert "Approve scoring/ticket_labels?" in str(message) and "cost_usd: 12.5" in str(message)
    listed = web.get(f"{gated.api.url}/api/approvals", headers=gated.api.key_headers(), timeout=10).json()
    assert [(r["target"], r["candidate_version"]) for r in listed] == [("scoring/ticket_labels", None)]
    # Downstream refuses an undecided materialization, even run on its own (the check skipped).
    refused = gated.flow.materialize([PUBLISHED])
    assert not refused.success and first["id"] in str(refused.all_events) and "is pending" in str(refused.all_events)

    # Four eyes: the person who launched the run cannot approve it; M-of-N: one approval of two decides nothing.
    assert gated.api_approve(first["id"], "U1").status_code == 403
    assert gated.api_approve(first["id"], "U2").status_code == 200
    assert gated.request(first["id"])["status"] == "pending" and gated.tick() == []
    assert gated.click(first["id"], "U2").status_code == 200  # the same person twice is still one approval
    assert gated.request(first["id"])["status"] == "pending"
    assert gated.click(first["id"], "U3").status_code == 200  # a signed Slack click decides
    _decided(gated, meta)

    # A signed link decides the next materialization's request, the CLI with an operator key the one after.
    _, meta = gated.materialize()
    gated.tick()  # announces it, with personal links
    assert gated.api_approve(str(meta["approval_id"]), "U3").status_code == 200
    assert gated.link(str(meta["approval_id"]), "U2").status_code == 200
    _decided(gated, meta)
    _, meta = gated.materialize()
    assert gated.tick() == []
    assert gated.click(str(meta["approval_id"]), "U1").status_code == 200
    assert operator_cli(["approvals", "approve", str(meta["approval_id"]), "--as", "U2"]) == 0
    _decided(gated, meta)
    _, meta = gated.materialize()
    assert operator_cli(["approvals", "approve", str(meta["approval_id"]), "--as", "U3"]) == 0
    assert gated.api_approve(str(meta["approval_id"]), "U1").status_code == 200  # the ops API decides
    _decided(gated, meta)

    # A clearly good materialization passes by the rule, as `policy`, and publishes once.
    run, meta = gated.materialize(accuracy=0.97)
    assert meta["status"] == "approved" and meta["_evaluation"].passed
    assert gated.request(str(meta["approval_id"]))["kind"] == "policy"
    _decided(gated, meta)

    # Expiry fails closed: nobody decides for a day, the request expires, the check errors, downstream refuses.
    _, meta = gated.materialize()
    gated.tick()
    gated.clock.advance(hours=25)
    assert gated.tick() == []
    expired = gated.request(str(meta["approval_id"]))
    assert expired["status"] == "expired" and expired["compensation"] is None
    checked = gated.check_only()
    assert not checked.passed and checked.severity == dg.AssetCheckSeverity.ERROR
    assert f"scoring/ticket_labels (digest {expired['candidate_digest'][:12]}…) was expired" in str(checked.description)
    refused = gated.flow.materialize([PUBLISHED])
    assert not refused.success and f"request {expired['id']} is expired" in str(refused.all_events)
    assert len(gated.published_runs()) == 5

    assert cli(["audit", "anchor"]) == 0
    assert cli(["audit", "verify"]) == 0
    capsys.readouterr()
    assert cli(["approvals", "show", first["id"]]) == 0  # the CLI names the target, its evidence and the votes
    shown = capsys.readouterr().out
    assert f"{first['id']}: scoring/ticket_labels (digest {first['candidate_digest'][:12]}…) · approved" in shown
    assert "evidence cost_usd: 12.5" in shown and "approve by U3 via slack" in shown
    assert cli(["approvals", "list"]) == 0 and "scoring/ticket_labels" in capsys.readouterr().out


def test_rematerializing_supersedes_the_pending_request_and_its_approval_cannot_publish_new_data(
    gated: Gated,
) -> None:
    _, old = gated.materialize()
    gated.tick()
    _, new = gated.materialize()  # the target changed while a person was looking at the old data
    assert new["approval_id"] != old["approval_id"]
    superseded = gated.request(str(old["approval_id"]))
    assert superseded["status"] == "superseded" and superseded["superseded_by"] == new["approval_id"]
    # Approving what a person saw earlier cannot count: the old request is closed.
    assert gated.api_approve(str(old["approval_id"]), "U2").status_code == 409
    assert gated.tick() == []  # nothing launched for it

    # The new request approved, then the target materialized once more without its check (it was skipped): the
    # approval is of the previous data, so downstream refuses the newest.
    assert gated.api_approve(str(new["approval_id"]), "U2").status_code == 200
    assert gated.api_approve(str(new["approval_id"]), "U3").status_code == 200
    assert gated.without_check().success
    [run] = gated.tick()  # the approval's own run: it meets the newer data and refuses to publish it
    assert not run.success and "has no approval request" in str(run.all_events)
    assert gated.published_runs() == []


def test_a_partitioned_target_is_gated_per_partition(gated: Gated) -> None:
    first = gated.flow.materialize([DAILY], partition_key="2026-12-01")
    second = gated.flow.materialize([DAILY], partition_key="2026-12-02")
    assert first.success and second.success
    requests = {r["target"]: r for r in gated.store.scoped("scoring__daily_summaries").requests.list_requests()}
    assert set(requests) == {"scoring/daily_summaries[2026-12-01]", "scoring/daily_summaries[2026-12-02]"}
    assert {r["status"] for r in requests.values()} == {"pending"}  # one day does not supersede the other
    approved = requests["scoring/daily_summaries[2026-12-01]"]
    assert gated.api_approve(approved["id"], "U1").status_code == 200
    [run] = gated.flow.tick_and_run("scoring__daily_summaries__approval_sensor")
    assert run.success and run.dagster_run.tags["dagster/partition"] == "2026-12-01"
    refused = gated.flow.materialize([DAILY_PUBLISHED], partition_key="2026-12-02")
    assert not refused.success and "scoring/daily_summaries[2026-12-02]" in str(refused.all_events)


def test_gates_merge_beside_each_other_and_beside_the_pipelines_of_the_code_location(
    env,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """A gate declared in runtime_ops' own defs folder is built beside its pipelines; two gates (one from code) merge
    without a resource clash; a gate may not take a pipeline's name (their requests would mix)."""
    pipelines = tmp_path / "pipelines"
    declare_pipeline(pipelines, "docs", tmp_path / "landing")
    (pipelines / "answers_gate").mkdir()
    (pipelines / "answers_gate" / "defs.yaml").write_text(
        "type: runtime_ops.components.ApprovalGate\nattributes:\n  target: docs/rag_answers\n  approvers: [U1]\n"
        "  on_approval: {job: docs__index_job}\n"
    )
    env(RUNTIME_OPS_PIPELINES_DIR=str(pipelines))
    second = approval_gate(
        target="docs/retrieval_index", approvers=["U1"], on_approval={"materialize": ["docs/rag_answers"]}
    )
    merged = dg.Definitions.merge(build_definitions(load_settings()), second)
    repo = merged.get_repository_def()
    sensors = {s.name for s in repo.sensor_defs}
    assert {"docs__rag_answers__approval_sensor", "docs__retrieval_index__approval_sensor"} <= sensors
    assert {"docs__approvals_sensor", "state"} <= sensors | set(merged.resources or {})
    assert {"docs__rag_answers__gate_state", "docs__retrieval_index__gate_state"} <= set(merged.resources or {})
    assert repo.get_job("docs__retrieval_index__on_approval") is not None

    (pipelines / "answers_gate" / "defs.yaml").write_text(
        "type: runtime_ops.components.ApprovalGate\nattributes:\n  target: docs/rag_answers\n  name: docs\n"
        "  approvers: [U1]\n  on_approval: {job: docs__index_job}\n"
    )
    with pytest.raises(PipelineConfigError, match="approval gate 'docs' has the name of a pipeline"):
        build_definitions(load_settings())
