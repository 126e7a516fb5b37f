"""Fixtures of the end-to-end tier: a real Dagster deployment as local processes (`support/topology.py`) on the
session PostgreSQL of the root conftest.py."""

from __future__ import annotations

import pytest

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
