"""What the commands share: the state store, its URL as shown, the default actor, tables."""

from __future__ import annotations

import getpass
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runtime_ops.observability.redaction import redact_url
from runtime_ops.settings import SettingsError, get_settings
from runtime_ops.store import open_store

if TYPE_CHECKING:
    from runtime_ops.store import StateStore

log = logging.getLogger("runtime_ops.cli")


def state_store(pipeline: str | None = None) -> StateStore:
    """The state store, unscoped (every pipeline) unless a pipeline is named."""
    settings = get_settings()
    return open_store(settings.resolved_database_url, settings, pipeline=pipeline, check=True)


def shown_database_url() -> str:
    """The state store's URL with its password redacted, as the commands print it."""
    return redact_url(get_settings().resolved_database_url)


def request_store(request_id: str) -> StateStore:
    """The store scoped to the pipeline that owns `request_id` (unscoped when no such request exists)."""
    store = state_store()
    request = store.requests.get_request(request_id)
    return store.scoped(request["pipeline"]) if request is not None else store


def default_actor() -> str:
    try:
        actor = get_settings().actor
    except SettingsError:
        actor = None  # reported properly when the command runs
    return f"cli:{actor or getpass.getuser()}"


def print_table(rows: list[dict[str, Any]], cols: Sequence[str]) -> None:
    if not rows:
        print("(none)")
        return
    cells = [[str(r.get(c) if r.get(c) is not None else "-") for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def when(value: Any) -> str | None:
    return f"{value:%Y-%m-%d %H:%M:%S}" if value is not None else None
