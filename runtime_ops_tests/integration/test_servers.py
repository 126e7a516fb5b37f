"""The test servers are real: each fixture is exercised through the client the product will use."""

from __future__ import annotations

import os
import socket

import pytest

from runtime_ops_tests.support import servers
from runtime_ops_tests.support.pgbouncer import PgBouncer


def test_free_port_is_bindable() -> None:
    port = servers.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_missing_binaries_fail_naming_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers.shutil, "which", lambda _name: None)
    monkeypatch.setattr(servers.glob, "glob", lambda _pattern: [])
    monkeypatch.setattr(servers.os, "access", lambda _path, _mode: False)
    with pytest.raises(servers.MissingServerBinary, match=r"`postgresql`"):
        servers.find_postgres_bindir()
    with pytest.raises(servers.MissingServerBinary, match=r"`redis-server`"):
        servers.find_redis_server()


def test_postgres_accepts_sqlalchemy_connections(postgres_server, postgres_url: str) -> None:
    import sqlalchemy as sa

    assert postgres_url.startswith(f"postgresql://postgres@127.0.0.1:{postgres_server.port}/")
    engine = sa.create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            assert "PostgreSQL" in conn.execute(sa.text("select version()")).scalar_one()
            conn.execute(sa.text("create table t (id int primary key)"))
            conn.execute(sa.text("insert into t values (1)"))
        with engine.connect() as conn:
            assert conn.execute(sa.text("select count(*) from t")).scalar_one() == 1
            settings = dict(
                conn.execute(
                    sa.text(
                        "select name, setting from pg_settings where name in "
                        "('fsync', 'listen_addresses', 'max_connections')"
                    )
                )
                .tuples()
                .all()
            )
        assert settings == {"fsync": "off", "listen_addresses": "127.0.0.1", "max_connections": "200"}
    finally:
        engine.dispose()


def test_postgres_databases_are_isolated(postgres_server, postgres_url: str) -> None:
    import sqlalchemy as sa

    other = postgres_server.create_database()
    try:
        engine = sa.create_engine(other)
        with engine.connect() as conn:
            assert conn.execute(sa.text("select count(*) from pg_tables where tablename = 't'")).scalar() == 0
        engine.dispose()
    finally:
        postgres_server.drop_database(other.rsplit("/", 1)[1])


def test_postgres_restart_keeps_port_and_data(postgres_server, postgres_url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(postgres_url, pool_pre_ping=True)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("create table kept (v text)"))
            conn.execute(sa.text("insert into kept values ('x')"))
        port = postgres_server.port
        postgres_server.restart()  # immediate: crash-like, then recovery
        assert postgres_server.port == port
        with engine.connect() as conn:
            assert conn.execute(sa.text("select v from kept")).scalar_one() == "x"
    finally:
        engine.dispose()


def test_pgbouncer_pools_backends_and_rides_out_a_postgres_restart(postgres_server, postgres_url: str) -> None:
    """The topology's storage pooler: the next client gets the last one's backend, reset (`DISCARD ALL`), and
    after a crash-like restart of PostgreSQL new clients are served again."""
    import psycopg2

    bouncer = PgBouncer(postgres_server.port).start()
    dbname = postgres_url.rsplit("/", 1)[1]

    def session(set_name: str | None = None) -> tuple[int, str]:
        conn = psycopg2.connect(host=servers.HOST, port=bouncer.port, user="postgres", dbname=dbname, connect_timeout=5)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                if set_name:
                    cur.execute("set application_name = %s", (set_name,))
                cur.execute("select pg_backend_pid(), current_setting('application_name')")
                row = cur.fetchone()
                assert row is not None
                return row[0], row[1]
        finally:
            conn.close()

    try:
        first, name = session(set_name="first client")
        assert name == "first client"
        assert session() == (first, "")  # pooled, and the first client's SET is gone
        postgres_server.restart()
        servers.wait_until(lambda: session()[0] != first, 15, "a new backend through PgBouncer after the restart")
    finally:
        bouncer.stop()


def test_postgres_runs_unprivileged_when_root(postgres_server, postgres_url: str) -> None:
    """As root (CI), PostgreSQL runs as an unprivileged user; otherwise as the user running the tests."""
    import sqlalchemy as sa

    expected_uid = postgres_server.user.pw_uid if os.geteuid() == 0 else os.geteuid()
    if os.geteuid() == 0:
        assert postgres_server.user is not None and expected_uid != 0
    assert os.stat(postgres_server.datadir).st_uid == expected_uid
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as conn:  # the backend lives as long as the connection
            pid = conn.execute(sa.text("select pg_backend_pid()")).scalar_one()
            assert os.stat(f"/proc/{pid}").st_uid == expected_uid
    finally:
        engine.dispose()


def test_moto_s3_put_get(s3_bucket, moto_server) -> None:
    import boto3

    client, bucket = s3_bucket
    client.put_object(Bucket=bucket, Key="docs/a b.txt", Body=b"hello")
    assert client.get_object(Bucket=bucket, Key="docs/a b.txt")["Body"].read() == b"hello"
    # The environment alone (as S3Resource / boto3 defaults see it) reaches the same server.
    assert os.environ["AWS_ENDPOINT_URL"] == moto_server.endpoint_url
    plain = boto3.client("s3")
    keys = [o["Key"] for o in plain.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["docs/a b.txt"]


def test_s3_buckets_are_fresh(s3_bucket) -> None:
    client, bucket = s3_bucket
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_redis_ping_pause_restart(redis_server, redis_url: str) -> None:
    assert redis_url == redis_server.url
    assert redis_server.ping()
    assert servers.redis_command(redis_server.port, "SET", "k", "v") == b"+OK"

    redis_server.pause()
    with pytest.raises(OSError):  # a frozen server: connect succeeds (kernel backlog), the reply times out
        servers.redis_command(redis_server.port, "PING", timeout=0.3)
    redis_server.resume()
    assert redis_server.ping()

    port = redis_server.port
    redis_server.stop()
    with pytest.raises(OSError):
        servers.redis_command(port, "PING", timeout=0.3)
    redis_server.start()
    assert redis_server.port == port and redis_server.ping()
    assert servers.redis_command(port, "GET", "k") == b"$-1"  # no persistence: a restart forgets


def test_dagster_instance_uses_postgres(dagster_instance, postgres_server) -> None:
    from dagster import asset, materialize
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

    assert isinstance(dagster_instance.run_storage, PostgresRunStorage)
    assert isinstance(dagster_instance.event_log_storage, PostgresEventLogStorage)
    assert f"127.0.0.1:{postgres_server.port}/dagster_" in dagster_instance.run_storage.postgres_url

    @asset
    def probe() -> int:
        return 1

    result = materialize([probe], instance=dagster_instance)
    assert result.success
    assert dagster_instance.get_run_by_id(result.run_id) is not None
    assert dagster_instance.get_latest_materialization_event(probe.key) is not None


def test_dagster_instances_are_isolated(dagster_instance) -> None:
    assert dagster_instance.get_runs_count() == 0


def test_runtime_ops_env(env, monkeypatch, tmp_path, postgres_url: str) -> None:
    from runtime_ops.settings import get_settings

    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-leftover")
    monkeypatch.setenv("RUNTIME_OPS_APPROVERS", "someone")
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:1/0")
    home = env(database_url=postgres_url, landing=str(tmp_path / "landing"), RUNTIME_OPS_MAX_REGRESSION="0.1")
    settings = get_settings()
    assert settings.resolved_home == home.resolve() == (tmp_path / "home").resolve()
    assert settings.database_url == postgres_url
    assert settings.resolved_landing == str(tmp_path / "landing")
    assert settings.max_regression == 0.1
    assert settings.slack_bot_token is None and settings.approvers == () and settings.redis_url is None
