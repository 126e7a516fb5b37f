"""Text a state-store row and a UTF-8 reply can hold (pure): no NUL character (PostgreSQL text refuses it) and no
lone UTF-16 surrogate (a JSON "\\ud800" escape, or a form field decoded leniently: not encodable as UTF-8).

Input checks call `unstorable(text)` and answer a 4xx naming the field, so such text never reaches the store, where
it would fail the transaction with a 5xx (and a webhook sender would retry it for ever).
"""

from __future__ import annotations

import re

_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


def unstorable(text: str) -> str | None:
    """What in `text` cannot be stored ("a NUL character at position 3"), or None when all of it can."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    what = "a NUL character" if found.group() == "\x00" else "a lone UTF-16 surrogate"
    return f"{what} at position {found.start()}"
