from __future__ import annotations

from pathlib import Path

import pytest

from runtime_ops.settings import SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("RUNTIME_OPS_", "SLACK_")) or name in ("REDIS_URL", "AWS_ENDPOINT_URL"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RUNTIME_OPS_HOME", str(tmp_path / "home"))


def test_unset_means_embedded_defaults(tmp_path: Path) -> None:
    s = load_settings()
    assert s.resolved_database_url == f"sqlite:///{tmp_path / 'home' / 'state.db'}"
    assert s.resolved_landing == str(tmp_path / "home" / "landing")
    assert s.redis_url is None and s.slack_bot_token is None and s.model_endpoint is None
    assert s.approvers == () and s.resolved_golden_set.name == "golden.jsonl"


def test_link_secret_is_generated_once_and_kept(tmp_path: Path) -> None:
    first = load_settings().resolved_link_secret()
    assert len(first) >= 32 and load_settings().resolved_link_secret() == first
    assert (tmp_path / "home" / "link_secret").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("REDIS_URL", "http://localhost:6379", "redis://"),
        ("RUNTIME_OPS_DATABASE_URL", "mysql://x", "SQLAlchemy URL"),
        ("RUNTIME_OPS_LANDING", "gs://bucket", "s3://"),
        ("RUNTIME_OPS_LANDING", "s3://", "no bucket"),
        ("AWS_ENDPOINT_URL", "localhost:9000", "http"),
        ("RUNTIME_OPS_AUTO_APPROVE_MARGIN", "lots", "number"),
        ("RUNTIME_OPS_MAX_REGRESSION", "1.5", "less than or equal"),
        ("RUNTIME_OPS_BATCH_MAX_OBJECTS", "50000", "less than or equal"),
        ("RUNTIME_OPS_SENSOR_INTERVAL", "soon", "not a duration"),
    ],
)
def test_wrong_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as exc:
        load_settings()
    assert name in str(exc.value) and message in str(exc.value)


def test_secrets_are_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-very-secret")
    with pytest.raises(SettingsError) as exc:
        load_settings()  # a token without a channel is a configuration error
    assert "SLACK_APPROVAL_CHANNEL" in str(exc.value) and "xoxb-very-secret" not in str(exc.value)


def test_lists_and_postgres_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNTIME_OPS_APPROVERS", "U1, U2,,U3")
    monkeypatch.setenv("RUNTIME_OPS_DATABASE_URL", "postgres://u@h/db")
    s = load_settings()
    assert s.approvers == ("U1", "U2", "U3")
    assert s.resolved_database_url == "postgresql://u@h/db"


def test_sensor_interval_overrides_every_sensor_of_the_code_location(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_ops.definitions import build_definitions

    def intervals() -> dict[str, int]:
        defs = build_definitions(load_settings())
        return {s.name: s.minimum_interval_seconds or 0 for s in defs.sensors or []}

    defaults = intervals()
    assert defaults["automation_sensor"] == 30 and defaults["demo__landing_sensor"] == 15
    assert defaults["demo__corpus_sensor"] == 30 and defaults["demo__approvals_sensor"] == 10
    monkeypatch.setenv("RUNTIME_OPS_SENSOR_INTERVAL", "2s")
    assert intervals() == dict.fromkeys(defaults, 2)
