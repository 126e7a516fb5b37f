"""A pipeline declaration with a mistake fails at load, naming the file, the line and the field."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from runtime_ops.components.loading import PipelineConfigError, check_folder, check_landings, load_specs
from runtime_ops.settings import load_settings

HEADER = "type: runtime_ops.components.RetrievalPipeline\nattributes:\n  name: alpha\n"


def declare(root: Path, name: str, body: str) -> Path:
    path = root / name / "defs.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def error_of(root: Path) -> str:
    with pytest.raises(PipelineConfigError) as exc:
        check_folder(root)
    return str(exc.value)


def test_unknown_field_names_file_line_and_field(tmp_path: Path) -> None:
    path = declare(tmp_path, "alpha", HEADER + "  gate:\n    primary_metric: ndcg@5\n    auto_aprove_margin: 0.1\n")
    assert f"{path}:6: attributes.gate.auto_aprove_margin: Extra inputs are not permitted" in error_of(tmp_path)


def test_bad_value_names_file_line_and_field(tmp_path: Path) -> None:
    path = declare(tmp_path, "alpha", HEADER + "  gate:\n    auto_approve_margin: 3\n")
    message = error_of(tmp_path)
    assert f"{path}:5: attributes.gate.auto_approve_margin: Input should be less than or equal to 1" in message
    path = declare(tmp_path, "alpha", HEADER + "  approvals:\n    expire_after: soon\n")
    assert f"{path}:5: attributes.approvals.expire_after: 'soon' is not a duration" in error_of(tmp_path)
    path = declare(tmp_path, "alpha", HEADER + "  landing:\n    uri: ftp://host/x\n")
    assert f"{path}:5: attributes.landing.uri: must be s3://bucket[/prefix]" in error_of(tmp_path)


def test_literal_secret_is_refused_without_echoing_it(tmp_path: Path) -> None:
    path = declare(tmp_path, "alpha", HEADER + "  answers:\n    api_key: sk-live-123456\n")
    message = error_of(tmp_path)
    assert f"{path}:5: attributes.answers.api_key: a literal secret is not allowed here" in message
    assert "sk-live-123456" not in message
    declare(tmp_path, "alpha", HEADER + "  answers:\n    api_key: {env: ALPHA_MODEL_KEY}\n")
    assert [p.name for p in check_folder(tmp_path)] == ["alpha"]


def test_bad_name_duplicate_name_and_shared_landing(tmp_path: Path) -> None:
    path = declare(tmp_path, "alpha", HEADER.replace("name: alpha", "name: Alpha-1"))
    assert f"{path}:3: attributes.name: pipeline name 'Alpha-1' must be" in error_of(tmp_path)
    declare(tmp_path, "alpha", HEADER + "  landing:\n    uri: /data/a\n")
    second = declare(tmp_path, "beta", HEADER + "  landing:\n    uri: /data/b\n")
    assert f"{second}:3: attributes.name: pipeline 'alpha' is already declared" in error_of(tmp_path)
    declare(tmp_path, "beta", HEADER.replace("alpha", "beta") + "  landing:\n    uri: /data/a/\n")
    with pytest.raises(PipelineConfigError, match=r"both land in /data/a; give each its own landing\.uri"):
        check_landings(check_folder(tmp_path), load_settings())


def test_two_pipelines_resolve_their_own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNTIME_OPS_PIPELINES_DIR", str(tmp_path))
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RUNTIME_OPS_AUTO_APPROVE_MARGIN", "0.3")  # the default for fields left out
    (tmp_path / "alpha" / "golden.jsonl").parent.mkdir()
    declare(
        tmp_path,
        "alpha",
        HEADER
        + "  landing: {uri: alpha-landing}\n"
        + "  evaluation: {golden_set: golden.jsonl}\n"
        + "  approvals: {approvers: [U1, U2], required_approvals: 2, slack_channel: C_ALPHA, escalate_after: 1h,\n"
        + "              expire_after: 2h}\n"
        + "  gate: {auto_approve_margin: 0.1}\n",
    )
    declare(tmp_path, "beta", HEADER.replace("alpha", "beta") + "  landing: {uri: 's3://bucket/beta'}\n")
    specs = load_specs(load_settings())
    alpha, beta = specs["alpha"], specs["beta"]
    assert alpha.landing.uri == str(tmp_path / "home" / "alpha-landing") and beta.landing.uri == "s3://bucket/beta"
    assert alpha.golden_set == tmp_path / "alpha" / "golden.jsonl"
    assert alpha.approvals.approvers == ("U1", "U2") and alpha.approvals.required_approvals == 2
    assert alpha.approvals.slack_channel == "C_ALPHA" and alpha.approvals.expire_after.total_seconds() == 7200
    assert (alpha.gate.auto_approve_margin, beta.gate.auto_approve_margin) == (0.1, 0.3)
    assert beta.approvals.approvers == () and beta.golden_set.name == "golden.jsonl"


def test_a_bad_declaration_fails_the_code_location_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_ops.definitions import build_definitions

    path = declare(tmp_path, "alpha", HEADER + "  schedules:\n    retrain_cron: '0 3 * * *'\n    weekly: true\n")
    monkeypatch.setenv("RUNTIME_OPS_PIPELINES_DIR", str(tmp_path))
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(tmp_path / "home"))
    with pytest.raises(PipelineConfigError) as exc:
        build_definitions(load_settings())
    assert f"{path}:6: attributes.schedules.weekly: Extra inputs are not permitted" in str(exc.value)


def _load_error(root: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    monkeypatch.setenv("RUNTIME_OPS_PIPELINES_DIR", str(root))
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(root / "home"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(PipelineConfigError) as exc:
        load_specs(load_settings())
    return str(exc.value)


def test_more_approvals_required_than_approvers_can_give_fails_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """M of N with M > N loads today and fails only when a request opens; it must fail at load, at the line."""
    for name in ("RUNTIME_OPS_APPROVERS", "RUNTIME_OPS_ESCALATION_APPROVERS", "RUNTIME_OPS_REQUIRED_APPROVALS"):
        monkeypatch.delenv(name, raising=False)
    path = declare(tmp_path, "alpha", HEADER + "  approvals:\n    approvers: [alice]\n    required_approvals: 3\n")
    message = _load_error(tmp_path, monkeypatch)
    assert message.startswith(f"{path}:6: attributes.approvals.required_approvals: 3 approvals required"), message
    assert "only 1 approver can ever decide: alice (approvals.approvers)" in message

    # Escalation tiers count: everyone who can ever decide.
    declare(
        tmp_path,
        "alpha",
        HEADER + "  approvals:\n    approvers: [alice]\n    required_approvals: 3\n"
        "    escalation:\n      - {approvers: [bob], after: 1h}\n      - {approvers: [carol], after: 2h}\n",
    )
    assert load_specs(load_settings())["alpha"].approvals.required_approvals == 3
    declare(
        tmp_path,
        "alpha",
        HEADER + "  approvals:\n    approvers: [alice]\n    required_approvals: 4\n"
        "    escalation:\n      - {approvers: [bob, alice], after: 1h}\n",
    )
    assert "only 2 approvers can ever decide: alice (approvals.approvers) and bob (approvals.escalation)" in (
        _load_error(tmp_path, monkeypatch)
    )


def test_the_process_wide_approvers_are_checked_too_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNTIME_OPS_REQUIRED_APPROVALS", raising=False)
    path = declare(tmp_path, "alpha", HEADER + "  approvals:\n    required_approvals: 2\n")
    message = _load_error(tmp_path, monkeypatch, RUNTIME_OPS_APPROVERS="alice")
    assert message.startswith(f"{path}:5: attributes.approvals.required_approvals: 2 approvals required"), message
    assert "alice (RUNTIME_OPS_APPROVERS)" in message
    path = declare(tmp_path, "alpha", HEADER + "  approvals:\n    approvers: [alice, bob]\n")
    message = _load_error(tmp_path, monkeypatch, RUNTIME_OPS_REQUIRED_APPROVALS="3", RUNTIME_OPS_APPROVERS="a,b,c")
    assert message.startswith(f"{path}:5: attributes.approvals.approvers: 3 approvals required"), message
    assert "(RUNTIME_OPS_REQUIRED_APPROVALS)" in message and "alice, bob (approvals.approvers)" in message


def test_escalation_that_would_come_after_expiry_fails_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default escalation (4h) a request that expires after 1h could never open."""
    monkeypatch.delenv("RUNTIME_OPS_ESCALATE_AFTER", raising=False)
    path = declare(tmp_path, "alpha", HEADER + "  approvals:\n    expire_after: 1h\n")
    message = _load_error(tmp_path, monkeypatch)
    assert message.startswith(f"{path}:5: attributes.approvals.expire_after: the last escalation tier"), message
    assert "RUNTIME_OPS_ESCALATE_AFTER" in message and "escalate_after: off" in message


def test_queries_default_to_hash_for_30_days_and_refuse_what_is_not_a_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNTIME_OPS_PIPELINES_DIR", str(tmp_path))
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(tmp_path / "home"))
    declare(tmp_path, "alpha", HEADER + "  landing: {uri: a}\n  queries: {log: text, retain: 7d}\n")
    declare(tmp_path, "beta", HEADER.replace("alpha", "beta") + "  landing: {uri: b}\n")
    specs = load_specs(load_settings())
    assert (specs["alpha"].queries.log, specs["alpha"].queries.retain) == ("text", timedelta(days=7))
    assert (specs["beta"].queries.log, specs["beta"].queries.retain) == ("hash", timedelta(days=30))
    path = declare(tmp_path, "alpha", HEADER + "  queries:\n    log: everything\n")
    assert f"{path}:5: attributes.queries.log: Input should be 'text', 'hash' or 'off'" in error_of(tmp_path)
    path = declare(tmp_path, "alpha", HEADER + "  queries:\n    retain: off\n")
    assert f"{path}:5: attributes.queries.retain: must be a duration such as 30d" in error_of(tmp_path)
