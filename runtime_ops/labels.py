"""How log lines and messages name model versions and indexes (pure): `v3`, `#4`, and `none` for a missing one.

One place, so that an alias that is not set yet (the first promotion's previous production, a pipeline with no
serving index) reads "production: none -> v1" rather than "vNone -> v1".
"""

from __future__ import annotations

NONE = "none"


def version_label(version: int | str | None) -> str:
    """`v3`, or `none` when there is no version."""
    return NONE if version is None else f"v{version}"


def index_label(index_id: int | str | None) -> str:
    """`#4`, or `none` when there is no index."""
    return NONE if index_id is None else f"#{index_id}"
