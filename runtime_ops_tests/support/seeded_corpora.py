"""Synthetic corpora (bench/_synth.py) with their lsa models trained, built once per test session and copied for
each test that asks for one.

Seeding a few thousand chunks and training two models on them takes tens of seconds; copying the result takes
milliseconds. Every test gets a copy of its own (a PostgreSQL database created from the built one as its
`TEMPLATE`, or an SQLite file copied with SQLite's backup API), so tests share the starting state and nothing
else: what one test writes, no other sees.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from runtime_ops_tests.support.servers import PostgresServer, unique_name


@dataclass(frozen=True)
class SeededCorpus:
    url: str  # the test's own copy (SQLAlchemy URL)
    versions: tuple[int, ...]  # the model versions trained, one per seed, in the order of the seeds


def _build(url: str, chunks: int, seeds: tuple[int, ...]) -> tuple[int, ...]:
    """What the tests did for themselves: `seed_corpus`, then one `make_production` per seed (each moves
    `production` to its version; a test sets the aliases it needs on its copy)."""
    from bench._synth import make_production, seed_corpus

    seed_corpus(url, chunks)
    return tuple(int(make_production(url, seed=seed, embed=False)["production_version"]) for seed in seeds)


class CorpusTemplates:
    """Built corpora by (server, chunks, seeds); `postgres(...)` / `sqlite(...)` hand out copies."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._built: dict[tuple[str, int, tuple[int, ...]], tuple[str, tuple[int, ...]]] = {}

    @contextlib.contextmanager
    def postgres(self, server: PostgresServer, chunks: int, seeds: tuple[int, ...]) -> Iterator[SeededCorpus]:
        """A fresh database on `server` holding the corpus and its models; dropped afterwards."""
        key = (f"{server.bindir}:{server.port}", chunks, seeds)
        if key not in self._built:
            template = unique_name(f"corpus{chunks}")
            versions = _build(server.create_database(template), chunks, seeds)
            # CREATE DATABASE ... TEMPLATE needs the template to have no open connections.
            server.admin_execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{template}'")
            self._built[key] = (template, versions)
        template, versions = self._built[key]
        name = unique_name("corpus")
        url = server.create_database(name, template=template)
        try:
            yield SeededCorpus(url, versions)
        finally:
            if not server.running:  # a fault-injection test left it stopped
                server.start()
            server.drop_database(name)

    def sqlite(self, dest: Path, chunks: int, seeds: tuple[int, ...]) -> SeededCorpus:
        """The corpus and its models in a new SQLite file at `dest`."""
        key = ("sqlite", chunks, seeds)
        if key not in self._built:
            self.root.mkdir(parents=True, exist_ok=True)
            built = self.root / f"{unique_name(f'corpus{chunks}')}.db"
            self._built[key] = (str(built), _build(f"sqlite:///{built}", chunks, seeds))
        built, versions = self._built[key]
        # The backup API copies a consistent database whatever its journal (the store runs SQLite in WAL mode).
        with contextlib.closing(sqlite3.connect(built)) as src, contextlib.closing(sqlite3.connect(dest)) as dst:
            src.backup(dst)
        return SeededCorpus(f"sqlite:///{dest}", versions)
