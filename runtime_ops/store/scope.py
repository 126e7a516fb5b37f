"""Pipeline scoping: several retrieval pipelines share one state store, each pipeline's state is its own.

Every repository is bound to the shared engine and one pipeline (or none: an unscoped view whose reads span
every pipeline and whose pipeline-owned writes are refused). Reads of owned tables filter by the scope, inserts
set it, and a read by a global id (model version, request id, batch id, index id) of another pipeline's row
finds nothing. Model versions are numbered per pipeline, so a read by version needs a scope (`versioned`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import ColumnElement, Engine, Executable, Select, Table, true
from sqlalchemy.engine import Connection, Row

from runtime_ops.store.engine import fetch, tx

DEFAULT_PIPELINE = "demo"


class UnscopedWrite(RuntimeError):
    """A pipeline-owned write, or a read by model version, on an unscoped store
    (`open_store(url, settings, pipeline=None)`)."""


class Repository:
    """Base of the store's repositories: the shared engine and the pipeline scope."""

    def __init__(self, engine: Engine, pipeline: str | None) -> None:
        self.engine = engine
        self.pipeline = pipeline

    @contextlib.contextmanager
    def tx(self) -> Iterator[Connection]:
        with tx(self.engine) as conn:
            yield conn

    def fetch(self, statement: Executable, params: dict[str, Any] | None = None) -> list[Row[Any]]:
        """The rows of one standalone read statement, outside any transaction (`runtime_ops.store.engine.fetch`)."""
        return fetch(self.engine, statement, params)

    def pages(self, page_after: Callable[[int], Select[Any]]) -> Iterator[list[Row[Any]]]:
        """The pages of a keyset-paged read: `page_after(last)` selects the rows whose id (the first column) is
        above `last`, in id order, one page long. Each page is its own short transaction and starts where the last
        ended (no OFFSET re-scan); it stops at the first empty page."""
        last = 0
        while True:
            with self.tx() as conn:
                rows = list(conn.execute(page_after(last)).all())
            if not rows:
                return
            yield rows
            last = rows[-1][0]

    def owned(self, table: Table) -> ColumnElement[bool]:
        """The scope's filter on a pipeline-owned table (no filter when unscoped)."""
        if self.pipeline is None:
            return true()
        return table.c.pipeline == self.pipeline

    def versioned(self, table: Table) -> ColumnElement[bool]:
        """The scope's filter on a read that names a model version: a version number means a model only within one
        pipeline (v1 exists in each), so an unscoped store refuses."""
        return table.c.pipeline == self.owner("look up a model version")

    def owner(self, what: str = "write") -> str:
        """The pipeline a write belongs to; refuses on an unscoped store."""
        if self.pipeline is None:
            raise UnscopedWrite(
                f"{type(self).__name__}: cannot {what} on an unscoped state store (opened with pipeline=None); "
                "use store.scoped(<pipeline>)"
            )
        return self.pipeline


def row_dict(row: Any) -> dict[str, Any] | None:
    return dict(row._mapping) if row is not None else None
