"""Scoped API keys of the ops API, on PostgreSQL and SQLite: the store's create / verify / list / revoke (only a
hash is kept; last use written at most once a minute), `require_scope` on a FastAPI app of the test's own (401,
403, 200 and the key's identity in the route) and on `create_app`'s, the `runtime-ops keys` commands (the key is
printed once and never logged), the redaction of keys in log lines, and migrations 0010-0011 over a 0009 store."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from runtime_ops.api.app import build_context, create_app
from runtime_ops.api.auth import API_KEY_HEADER, ReadKey, SearchKey, require_scope
from runtime_ops.cli import main as cli
from runtime_ops.observability.redaction import REDACTED, Redactor
from runtime_ops.settings import get_settings
from runtime_ops.store import SCOPES, ApiKey, StateStore, UnknownScope, open_store
from runtime_ops.store import schema as t
from runtime_ops.store.engine import engine_for
from runtime_ops.store.migrate import current_revision, downgrade, head_revision, upgrade
from runtime_ops.store.operations.api_keys import LAST_USED_EVERY, key_id_of, parse_scopes
from runtime_ops_tests.support.approvals_support import FakeClock

KEY_RE = re.compile(r"rok_[0-9a-f]{8}_[A-Za-z0-9_\-]{43}")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return str(request.getfixturevalue("postgres_url"))


def _other_secret(key: str) -> str:
    """The same key id with a different (well-formed) secret."""
    secret = key[13:]
    return key[:13] + ("A" if secret[0] != "A" else "B") + secret[1:]


# ---------------------------------------------------------------------------------------------- the store


def test_create_verify_list_revoke(db_url: str) -> None:
    store = open_store(db_url, get_settings(), pipeline=None)  # the API's unscoped store
    t0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    new = store.api_keys.create("search-bot", ["search", "read"], created_by="cli:alice", now=t0)
    key, info = new.key, new.info
    assert KEY_RE.fullmatch(key) and key.startswith(info.key_id + "_") and len(info.key_id) == 12
    assert key not in repr(new)  # the secret stays out of reprs (and so out of tracebacks and logs)
    assert (info.name, info.scopes, info.created_by, info.created_at) == (
        "search-bot",
        ("read", "search"),
        "cli:alice",
        t0,
    )

    # Only the SHA-256 of the key is stored: no column holds the key or its secret.
    with store.tx() as conn:
        row = dict(conn.execute(select(t.api_keys)).mappings().one())
    assert row["secret_hash"] == hashlib.sha256(key.encode()).hexdigest()
    assert not any(isinstance(v, str) and key[13:] in v for v in row.values())

    found = store.api_keys.verify(key, now=t0 + timedelta(seconds=5))
    assert isinstance(found, ApiKey) and found.key_id == info.key_id and found.scopes == ("read", "search")
    assert found.allows("search") and found.allows("read") and not found.allows("decide")
    assert found.last_used_at == t0 + timedelta(seconds=5)
    for wrong in (
        _other_secret(key),
        key + "x",
        key[:-1],
        "rok_00000000_" + key[13:],
        "",
        "Bearer " + key,
        key.upper(),
    ):
        assert store.api_keys.verify(wrong) is None, wrong

    # Keys are process-wide: any pipeline's store sees the same ones.
    assert store.scoped("alpha").api_keys.verify(key) is not None
    assert [k.key_id for k in store.scoped("beta").api_keys.list_keys()] == [info.key_id]
    assert store.api_keys.get(info.key_id[4:]) == store.api_keys.get(key) == store.api_keys.get(info.key_id)

    other = store.api_keys.create("ops", ["admin"], now=t0 + timedelta(minutes=1)).info
    assert other.key_id != info.key_id and store.api_keys.get(other.key_id).allows("decide")  # type: ignore[union-attr]
    assert [k.key_id for k in store.api_keys.list_keys()] == [info.key_id, other.key_id]

    revoked = store.api_keys.revoke(info.key_id, by="cli:bob", now=t0 + timedelta(hours=1))
    assert revoked is not None and revoked.revoked and revoked.revoked_by == "cli:bob"
    assert store.api_keys.verify(key) is None
    again = store.api_keys.revoke(info.key_id, by="cli:carol")  # keeps the first revocation
    assert again is not None and (again.revoked_at, again.revoked_by) == (t0 + timedelta(hours=1), "cli:bob")
    assert store.api_keys.revoke("rok_00000000") is None and store.api_keys.revoke("not a key") is None
    assert [k.key_id for k in store.api_keys.list_keys(include_revoked=False)] == [other.key_id]
    assert len(store.api_keys.list_keys()) == 2


def test_last_use_is_written_at_most_once_a_minute(db_url: str) -> None:
    store = open_store(db_url, get_settings(), pipeline=None)
    t0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    new = store.api_keys.create("k", ["read"], now=t0)
    assert store.api_keys.get(new.info.key_id).last_used_at is None  # type: ignore[union-attr]
    for seconds, expected in ((1, 1), (30, 1), (60, 1), (61, 61), (90, 61), (122, 122)):
        assert store.api_keys.verify(new.key, now=t0 + timedelta(seconds=seconds)) is not None
        stored = store.api_keys.get(new.info.key_id).last_used_at  # type: ignore[union-attr]
        assert stored == t0 + timedelta(seconds=expected), seconds
    assert timedelta(minutes=1) == LAST_USED_EVERY


def test_scopes_and_names_are_checked(tmp_path: Path) -> None:
    assert SCOPES == ("read", "decide", "search", "admin")
    assert parse_scopes(["search", "read,decide", " READ "]) == ("read", "decide", "search")
    with pytest.raises(UnknownScope, match="valid scopes: read, decide, search, admin"):
        parse_scopes(["search", "write"])
    with pytest.raises(ValueError, match="at least one scope"):
        parse_scopes([","])
    with pytest.raises(ValueError, match="valid scopes"):
        require_scope("write")
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", get_settings(), pipeline=None)
    with pytest.raises(ValueError, match="name"):
        store.api_keys.create("  ", ["read"])
    with pytest.raises(UnknownScope):
        store.api_keys.create("x", ["superuser"])
    assert store.api_keys.list_keys() == []
    assert key_id_of("rok_0123abcd") == key_id_of("0123abcd") == "rok_0123abcd"
    assert key_id_of("rok_0123abcd_" + "x" * 43) == "rok_0123abcd"
    assert key_id_of("rok_0123ABCD") is None and key_id_of("rok_0123abcd_short") is None


# ---------------------------------------------------------------------------------------------- require_scope


def _throwaway_app(clock: FakeClock) -> FastAPI:
    """A FastAPI app of this test's own, on the same OpsContext `create_app` builds (no dependency overrides)."""
    app = FastAPI()
    app.state.ops = build_context(get_settings(), clock.now)

    @app.post("/search")
    def search(key: SearchKey, request: Request) -> dict[str, Any]:
        assert request.state.api_key is key
        return {"key_id": key.key_id, "name": key.name, "scopes": list(key.scopes)}

    @app.get("/decide")
    def decide(key: Annotated[ApiKey, Depends(require_scope("decide"))]) -> dict[str, Any]:
        return {"key_id": key.key_id}

    # A whole router behind one scope, the route asking for it again: one key check per request.
    router = APIRouter(dependencies=[Depends(require_scope("read"))])

    @router.get("/read")
    def read(key: ReadKey) -> dict[str, Any]:
        return {"label": key.label}

    app.include_router(router)
    return app


@pytest.fixture
def api(env, db_url: str) -> Iterator[tuple[TestClient, StateStore, FakeClock]]:  # type: ignore[no-untyped-def]
    env(database_url=db_url)
    clock = FakeClock()
    app = _throwaway_app(clock)
    with TestClient(app) as client:
        yield client, app.state.ops.store, clock


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_require_scope_answers_401_403_200(api, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    client, store, _ = api
    caplog.set_level(logging.INFO, "runtime_ops")
    search = store.api_keys.create("search-bot", ["search"]).key
    reader = store.api_keys.create("dashboard", ["read"]).key
    admin = store.api_keys.create("ops", ["admin"]).key
    revoked = store.api_keys.create("old", ["search"])
    store.api_keys.revoke(revoked.info.key_id)

    def refused(response: Any, status: int, reason: str) -> None:
        assert response.status_code == status, response.text
        assert reason in response.json()["detail"], response.json()
        if status == 401:
            assert response.headers["www-authenticate"] == "Bearer"

    refused(client.post("/search"), 401, "no API key")
    refused(client.post("/search", headers=_bearer("rok_0123abcd_" + "x" * 43)), 401, "unknown or revoked")
    refused(client.post("/search", headers=_bearer(_other_secret(search))), 401, "unknown or revoked")
    refused(client.post("/search", headers=_bearer("not-a-key")), 401, "unknown or revoked")
    refused(client.post("/search", headers=_bearer(revoked.key)), 401, "unknown or revoked")
    refused(client.post("/search", headers={API_KEY_HEADER: revoked.key}), 401, "unknown or revoked")
    for malformed in (f"Basic {search}", search, "Bearer", "Bearer ", f"Token {search}"):
        refused(client.post("/search", headers={"Authorization": malformed}), 401, "malformed Authorization")
    both = {**_bearer(search), API_KEY_HEADER: reader}
    refused(client.post("/search", headers=both), 401, "two different API keys")

    wrong_scope = client.post("/search", headers=_bearer(reader))
    refused(wrong_scope, 403, "lacks the 'search' scope")
    assert wrong_scope.headers["www-authenticate"] == 'Bearer error="insufficient_scope", scope="search"'
    refused(client.get("/read", headers=_bearer(search)), 403, "lacks the 'read' scope")

    search_id = key_id_of(search)
    for headers in (
        _bearer(search),
        {"Authorization": f"bearer  {search} "},
        {API_KEY_HEADER: search},
        {**_bearer(search), API_KEY_HEADER: search},
        {"Authorization": "Basic dXNlcjpwdw==", API_KEY_HEADER: search},  # a proxy's credentials beside the key
    ):
        ok = client.post("/search", headers=headers)
        assert ok.status_code == 200, (headers, ok.text)
        assert ok.json() == {"key_id": search_id, "name": "search-bot", "scopes": ["search"]}
    assert client.get("/read", headers=_bearer(reader)).json() == {"label": f"dashboard ({key_id_of(reader)})"}
    for path in ("/search", "/decide", "/read"):  # admin has every scope
        assert client.request("POST" if path == "/search" else "GET", path, headers=_bearer(admin)).status_code == 200

    # Refusals are logged with the key id, never the key.
    refusals = [r for r in caplog.records if r.getMessage().startswith("api key refused")]
    assert len({id(r) for r in refusals}) == 14  # one per refused request (caplog may hold a record twice)
    assert {getattr(r, "api_key", None) for r in refusals} >= {revoked.info.key_id, key_id_of(reader)}
    for secret in (search, reader, admin, revoked.key):
        assert secret not in caplog.text
        assert all(secret not in repr(vars(r)) for r in caplog.records)


def test_one_key_check_per_request_and_last_use(api, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    client, store, clock = api
    new = store.api_keys.create("dashboard", ["read"])
    calls: list[str] = []
    verify = store.api_keys.verify

    def counting(key: str, **kw: Any) -> ApiKey | None:
        calls.append(key)
        return verify(key, **kw)

    monkeypatch.setattr(store.api_keys, "verify", counting)
    assert client.get("/read", headers=_bearer(new.key)).status_code == 200
    assert len(calls) == 1  # the router's and the route's require_scope("read") are one dependency
    # The API's clock is what last use records, once a minute at most.
    assert store.api_keys.get(new.info.key_id).last_used_at == clock.current  # type: ignore[union-attr]
    first = clock.current
    clock.advance(seconds=30)
    assert client.get("/read", headers=_bearer(new.key)).status_code == 200
    assert store.api_keys.get(new.info.key_id).last_used_at == first  # type: ignore[union-attr]
    clock.advance(seconds=31)
    assert client.get("/read", headers=_bearer(new.key)).status_code == 200
    assert store.api_keys.get(new.info.key_id).last_used_at == clock.current  # type: ignore[union-attr]


def test_a_store_failure_is_503_not_a_pass(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env()
    clock = FakeClock()
    app = _throwaway_app(clock)
    store: StateStore = app.state.ops.store
    key = store.api_keys.create("k", ["search"]).key
    with store.tx() as conn:
        conn.execute(text("ALTER TABLE api_keys RENAME TO api_keys_away"))
    response = TestClient(app).post("/search", headers=_bearer(key))
    assert response.status_code == 503 and "retry later" in response.json()["detail"]


def test_openapi_declares_both_ways_in(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env()
    schema = _throwaway_app(FakeClock()).openapi()
    schemes = schema["components"]["securitySchemes"]
    assert (schemes["ApiKeyBearer"]["type"], schemes["ApiKeyBearer"]["scheme"]) == ("http", "bearer")
    assert schemes["ApiKeyHeader"] == {"type": "apiKey", "in": "header", "name": API_KEY_HEADER}
    assert {"ApiKeyBearer": []} in schema["paths"]["/search"]["post"]["security"]


# ---------------------------------------------------------------------------------------------- the CLI


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_cli_create_list_revoke_round_trip(env, capsys, caplog) -> None:  # type: ignore[no-untyped-def]
    env(RUNTIME_OPS_LOG_FORMAT="json")
    caplog.set_level(logging.INFO)
    assert cli(["keys", "create", "search-bot", "--scope", "search", "--scope", "read", "--as", "alice"]) == 0
    out, err = capsys.readouterr()
    key = out.strip()
    assert KEY_RE.fullmatch(key), out  # stdout is the key alone: KEY=$(runtime-ops keys create ...)
    key_id = key[:12]
    assert "cannot be shown again" in err and f"runtime-ops keys revoke {key_id}" in err
    assert key not in err and key[13:] not in err
    [created] = [line for line in _json_lines(err) if line["message"] == "api key created"]
    assert created["api_key"] == key_id and created["scopes"] == ["read", "search"] and created["actor"] == "alice"

    # The API takes it (create_app as `runtime-ops serve` builds it, with a route that needs the scope).
    app = create_app(get_settings())
    router = APIRouter()

    @router.post("/api/probe")
    def probe(k: SearchKey) -> dict[str, str]:
        logging.getLogger("runtime_ops.api").info("probe by %s with %s", k.label, key)  # a careless log line
        return {"by": k.name}

    app.include_router(router)
    client = TestClient(app)
    assert client.post("/api/probe", headers=_bearer(key)).json() == {"by": "search-bot"}
    assert client.post("/api/probe").status_code == 401

    assert cli(["keys", "list"]) == 0
    out, err = capsys.readouterr()
    header, row = out.splitlines()
    assert header.split() == [
        "key_id",
        "name",
        "scopes",
        "approver",
        "created_at",
        "created_by",
        "last_used_at",
        "revoked_at",
    ]
    assert row.split()[:3] == [key_id, "search-bot", "read,search"] and "alice" in row and row.rstrip().endswith("-")
    assert key[13:] not in out + err
    assert cli(["keys", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["key_id"] == key_id and listed["last_used_at"] is not None and listed["revoked_at"] is None
    assert key[13:] not in json.dumps(listed)

    assert cli(["keys", "create", "x", "--scope", "serch"]) == 2
    assert "unknown scope(s) serch; valid scopes: read, decide, search, admin" in capsys.readouterr().err
    assert cli(["keys", "revoke", "rok_00000000"]) == 1
    assert "no API key rok_00000000" in capsys.readouterr().err
    assert cli(["keys", "revoke", "nonsense"]) == 2
    capsys.readouterr()

    assert cli(["keys", "revoke", key_id, "--as", "bob"]) == 0
    out, err = capsys.readouterr()
    assert f"revoked API key {key_id} (search-bot)" in out
    assert [line["api_key"] for line in _json_lines(err) if line["message"] == "api key revoked"] == [key_id]
    assert client.post("/api/probe", headers=_bearer(key)).status_code == 401
    assert cli(["keys", "revoke", key_id]) == 0
    assert "already revoked" in capsys.readouterr().out and cli(["keys", "list", "--active"]) == 0
    assert capsys.readouterr().out.strip() == "(none)"
    assert cli(["keys", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["revoked_at"] is not None

    # The key appeared once, on the create command's stdout: in no log record, however it was logged.
    assert key not in caplog.text and key[13:] not in caplog.text
    # (A set: after other logging tests, caplog can hold a record twice, from runtime_ops' logger and the root.)
    probe_lines = {r.getMessage() for r in caplog.records if r.getMessage().startswith("probe by")}
    assert probe_lines == {f"probe by search-bot ({key_id}) with {key_id}_{REDACTED}"}


def test_redaction_keeps_the_key_id_and_drops_the_secret() -> None:
    key = "rok_0123abcd_" + "s3cr3t-_" * 5 + "xyz"
    redact = Redactor()
    assert redact.text(f"using {key} now", ()) == f"using rok_0123abcd_{REDACTED} now"
    assert redact.text(f"truncated {key[:20]}", ()) == f"truncated rok_0123abcd_{REDACTED}"
    assert key[13:] not in redact.text(f"Authorization: Bearer {key}", ())
    assert redact.text(f'{{"X-API-Key": "{key}"}}', ()) == f'{{"X-API-Key": "rok_0123abcd_{REDACTED}"}}'
    assert redact.value({"headers": [key]}, ()) == {"headers": [f"rok_0123abcd_{REDACTED}"]}
    assert redact.text("key rok_0123abcd was revoked", ()) == "key rok_0123abcd was revoked"


# ---------------------------------------------------------------------------------------------- migration 0011


def test_migrations_0010_and_0011_over_a_0009_database_with_data(db_url: str) -> None:
    engine = engine_for(db_url, get_settings())
    upgrade(engine, get_settings(), "0009")
    at = datetime(2026, 12, 4, tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO locks (name, token, expires_at_ms, fence) VALUES ('promotion', NULL, 0, 7)"))
        conn.execute(
            text(
                "INSERT INTO retrain_requests (pipeline, source, reason, corpus_revision, status, created_at) "
                "VALUES ('alpha', 'manual', 'why not', 3, 'pending', :t)"
            ),
            {"t": at},
        )
    upgrade(engine, get_settings())
    assert current_revision(engine) == head_revision()
    store = StateStore(engine, get_settings(), pipeline="alpha")
    assert [r["reason"] for r in store.retraining.retrain_requests()] == ["why not"]
    with engine.begin() as conn:
        assert conn.execute(text("SELECT fence FROM locks WHERE name = 'promotion'")).scalar() == 7
    new = store.api_keys.create("after-upgrade", ["read"])
    assert store.api_keys.verify(new.key) is not None

    downgrade(engine, get_settings(), "0009")
    assert current_revision(engine) == "0009"
    with engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM retrain_requests")).scalar() == 1
    upgrade(engine, get_settings())
    assert store.api_keys.list_keys() == []


def test_api_keys_table_matches_its_migration(db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    store = open_store(db_url, get_settings())
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
    assert [d for d in diffs if "api_keys" in repr(d)] == []
