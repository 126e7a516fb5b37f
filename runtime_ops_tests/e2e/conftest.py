"""Fixtures of the end-to-end tier: a real Dagster deployment as local processes (`support/topology.py`) on the
session PostgreSQL of the root conftest.py; the real Alertmanager and Prometheus server (Debian's packages)."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_ops_tests.support.alertmanager import Alertmanager
from runtime_ops_tests.support.prometheus import PrometheusServer
from runtime_ops_tests.support.servers import MissingServerBinary
from runtime_ops_tests.support.topology import Topology


@pytest.fixture
def topology(postgres_server, _dagster_template, tmp_path):  # type: ignore[no-untyped-def]
    """`topology(**env)` -> a Topology (nothing started yet) on the session PostgreSQL; stopped afterwards."""
    made: list[Topology] = []

    def make(**env: str | None) -> Topology:
        topo = Topology.create(postgres_server, tmp_path / f"topology{len(made)}", template=_dagster_template, env=env)
        made.append(topo)
        return topo

    yield make
    for topo in made:
        topo.stop()


@pytest.fixture
def alertmanager(tmp_path):  # type: ignore[no-untyped-def]
    """`alertmanager(webhook_url, bearer_token=None)` -> the real Alertmanager, started; stopped afterwards."""
    started: list[Alertmanager] = []

    def start(webhook_url: str, bearer_token: str | None = None) -> Alertmanager:
        try:
            server = Alertmanager(tmp_path / f"alertmanager{len(started)}", webhook_url, bearer_token)
        except MissingServerBinary as exc:
            pytest.fail(str(exc), pytrace=False)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def prometheus(tmp_path):  # type: ignore[no-untyped-def]
    """`prometheus(target=host:port, bearer_key=..., rules=path, alertmanager=host:port)` -> a throwaway Prometheus
    server (`support/prometheus.py`), started; stopped afterwards."""
    started: list[PrometheusServer] = []

    def start(**kwargs: Any) -> PrometheusServer:
        try:
            server = PrometheusServer(tmp_path / f"prometheus{len(started)}", **kwargs)
        except MissingServerBinary as exc:
            pytest.fail(str(exc), pytrace=False)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
