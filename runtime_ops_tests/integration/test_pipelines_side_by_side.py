"""Two pipelines declared in YAML run side by side on one PostgreSQL state store and one Dagster instance:
each with its own landing, golden set, approvers and policy; each decision moves only its own `production`.
Model versions count per pipeline, so both have a v1 and a v2: gate, approvals, promotion and serving keep them
apart by (pipeline, version).
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runtime_ops.approvals import links
from runtime_ops.definitions import build_definitions
from runtime_ops.demo import CORPUS_DIR
from runtime_ops.locks.factory import locker_for
from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer, operator_cli
from runtime_ops_tests.support.flow import Flow
from runtime_ops_tests.support.served import served_from

# alpha serves the data and text docs, beta the files and net docs: disjoint corpora and golden sets.
CORPORA = {"alpha": ("data", "text"), "beta": ("files", "net")}


def _golden_subset(folders: tuple[str, ...], dest: Path) -> int:
    rows = [json.loads(line) for line in (CORPUS_DIR.parent / "golden.jsonl").read_text().splitlines() if line]
    keep = [r for r in rows if all(k.split("/")[1] in folders for k in r["relevant"])]
    dest.write_text("".join(json.dumps(r) + "\n" for r in keep))
    return len(keep)


def _declare(root: Path, landing_root: Path) -> None:
    # alpha: one of two approvers decides; beta: both of its two approvers must agree, and it tolerates more
    # regression before meets_policy fails.
    policies = {"alpha": (["UA1", "UA2"], 1, 0.5), "beta": (["UB1", "UB2"], 2, 0.9)}
    for name, folders in CORPORA.items():
        folder = root / name
        folder.mkdir(parents=True)
        assert _golden_subset(folders, folder / "golden.jsonl") >= 4
        approvers, required, max_regression = policies[name]
        (folder / "defs.yaml").write_text(
            "type: runtime_ops.components.RetrievalPipeline\n"
            "attributes:\n"
            f"  name: {name}\n"
            f"  landing: {{uri: '{landing_root / name}'}}\n"
            "  evaluation: {golden_set: golden.jsonl}\n"
            f"  gate: {{auto_approve_margin: 1.0, max_regression: {max_regression}}}\n"
            f"  approvals: {{approvers: {json.dumps(approvers)}, required_approvals: {required}, "
            f"slack_channel: C_{name.upper()}}}\n"
        )


def _land(name: str, part: int, landing_root: Path) -> None:
    """Land half of each of the pipeline's folders (part 0 or 1) under corpus-relative keys."""
    for folder in CORPORA[name]:
        files = sorted((CORPUS_DIR / "stdlib" / folder).iterdir())[part::2]
        for src in files:
            dest = landing_root / name / "stdlib" / folder / src.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)


def test_two_pipelines_gate_and_promote_independently(env, postgres_url, dagster_instance, tmp_path, capsys) -> None:
    pipelines, landing_root = tmp_path / "pipelines", tmp_path / "landing"
    _declare(pipelines, landing_root)
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines))
    defs = build_definitions(load_settings())
    flows = {name: Flow(dagster_instance, defs=defs, pipeline=name) for name in CORPORA}
    stores = {name: open_store(get_settings().resolved_database_url, get_settings(), pipeline=name) for name in CORPORA}

    # First model of each pipeline: nothing to beat, auto-approved, serving.
    for name, flow in flows.items():
        _land(name, 0, landing_root)
        assert all(r.success for r in flow.tick_and_run("landing_sensor"))
        [train] = flow.tick_and_run("corpus_sensor")
        assert train.success, name
    v1 = {name: s.registry.alias("production") for name, s in stores.items()}
    assert v1 == {"alpha": 1, "beta": 1}  # a second pipeline's first model is v1, not v2
    digests = {name: s.registry.get_model(1)["digest"] for name, s in stores.items()}
    assert digests["alpha"] != digests["beta"]  # each pipeline's v1 is its own model

    # Second candidates wait for their own approvers.
    for name, flow in flows.items():
        _land(name, 1, landing_root)
        assert all(r.success for r in flow.tick_and_run("landing_sensor"))
        [train] = flow.tick_and_run("corpus_sensor")
        assert train.success  # waiting for a person is not a failure: production_model waits for the decision
    pending = {name: s.requests.list_requests(status="pending") for name, s in stores.items()}
    assert [len(p) for p in pending.values()] == [1, 1]
    alpha_req, beta_req = pending["alpha"][0], pending["beta"][0]
    assert alpha_req["candidate_version"] == beta_req["candidate_version"] == 2  # v2 in both, each its own
    assert alpha_req["approvers"] == ["UA1", "UA2"] and beta_req["required_approvals"] == 2
    # Each report was scored on its own golden set.
    assert (
        stores["alpha"].evaluations.latest_eval_report()["candidate_metrics"]
        != stores["beta"].evaluations.latest_eval_report()["candidate_metrics"]
    )

    # A beta approver cannot decide alpha's request (CLI), nor can a signed link issued to them.
    assert operator_cli(["approvals", "approve", alpha_req["id"], "--as", "UB1"]) == 1
    assert "not an approver" in capsys.readouterr().out
    secret = get_settings().resolved_link_secret()
    forged = links.issue(
        secret,
        request_id=alpha_req["id"],
        approver="UB1",
        digest=alpha_req["candidate_digest"],
        expires_at=datetime.now(UTC) + timedelta(hours=1),
    )
    with ApiServer(get_settings()) as api:
        page = web.post(f"{api.url}/approvals/{forged}", data={"action": "approve"}, timeout=10)
        assert page.status_code == 403, page.text
        # A genuine link's page names the pipeline the candidate belongs to.
        genuine = links.issue(
            secret,
            request_id=alpha_req["id"],
            approver="UA2",
            digest=alpha_req["candidate_digest"],
            expires_at=datetime.now(UTC) + timedelta(hours=1),
        )
        evidence = web.get(f"{api.url}/approvals/{genuine}", timeout=10)
        assert evidence.status_code == 200 and "<b id=pipeline>alpha</b>" in evidence.text
        read = api.key_headers("read")
        listed = web.get(f"{api.url}/api/approvals", params={"status": "pending"}, headers=read, timeout=10).json()
        assert {(r["id"], r["pipeline"]) for r in listed} == {(alpha_req["id"], "alpha"), (beta_req["id"], "beta")}
        only_beta = web.get(f"{api.url}/api/approvals", params={"pipeline": "beta"}, headers=read, timeout=10).json()
        assert {r["pipeline"] for r in only_beta} == {"beta"}
        metrics = web.get(f"{api.url}/metrics", headers=read, timeout=10).text
    assert 'pipeline="alpha"' in metrics and 'pipeline="beta"' in metrics
    assert stores["alpha"].requests.get_request(alpha_req["id"])["status"] == "pending"

    # alpha's approver approves: only alpha's approvals sensor launches a promotion, only alpha's alias moves.
    assert operator_cli(["approvals", "approve", alpha_req["id"], "--as", "UA1"]) == 0
    assert flows["beta"].tick("approvals_sensor") == []
    [promotion] = flows["alpha"].tick("approvals_sensor")
    assert promotion.run_key == alpha_req["id"] and promotion.job_name == "alpha__promotion_job"
    assert promotion.tags["runtime_ops/lifecycle"] == "alpha"
    assert flows["alpha"].run("approvals_sensor", promotion).success
    assert stores["alpha"].registry.alias("production") == alpha_req["candidate_version"]
    assert stores["beta"].registry.alias("production") == v1["beta"]

    # beta's production_model refuses alpha's approval: it is not a request of beta.
    refused = flows["beta"].materialize(
        ["production_model"],
        run_config={"ops": {"beta__production_model": {"config": {"approval_id": alpha_req["id"]}}}},
    )
    assert not refused.success and stores["beta"].registry.alias("production") == v1["beta"]

    # beta needs both of its approvers; then its own promotion moves only beta.
    assert operator_cli(["approvals", "approve", beta_req["id"], "--as", "UB1"]) == 0
    assert flows["beta"].tick("approvals_sensor") == []  # one of two
    assert operator_cli(["approvals", "approve", beta_req["id"], "--as", "UB2"]) == 0
    [promotion] = flows["beta"].tick("approvals_sensor")
    # Locks do not collide: beta promotes while alpha's promotion lock is held.
    with locker_for(None, get_settings().resolved_database_url, get_settings()).hold(
        "alpha:promotion", ttl_ms=60_000, wait_s=1
    ):
        assert flows["beta"].run("approvals_sensor", promotion).success
    assert stores["beta"].registry.alias("production") == beta_req["candidate_version"]
    assert stores["alpha"].registry.alias("production") == alpha_req["candidate_version"]
    for name, store in stores.items():
        history = store.registry.alias_history("production")
        assert [h["new_target"] for h in history] == [v1[name], pending[name][0]["candidate_version"]]
        # Run keys and locks did not collide: each batch and lock is the pipeline's own.
        assert all(b["pipeline"] == name for b in store.ledger.batches())
        # Each serves its own v2's index (named by pipeline and version), with its own model's vectors.
        index = store.indexes.current_index()
        assert (index["pipeline"], index["model_version"]) == (name, 2)

    # Searching each pipeline answers from its own v2: its own documents, embedded by its own model.
    with ApiServer(get_settings()) as api:
        search = api.key_headers("search")
        for name, folders in CORPORA.items():
            reply = web.post(
                f"{api.url}/api/search", json={"query": "read a file", "k": 5, "pipeline": name}, headers=search
            )
            assert reply.status_code == 200, reply.text
            found = reply.json()
            assert found["pipeline"] == name
            assert served_from(stores[name], found["request_id"]) == (2, stores[name].indexes.current_index()["id"])
            assert found["results"] and {r["document_key"].split("/")[1] for r in found["results"]} <= set(folders)
