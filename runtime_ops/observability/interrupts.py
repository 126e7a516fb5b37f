"""A Ctrl-C that Python cannot raise where it lands, said in one line instead of a traceback.

Under `make dev` Ctrl-C reaches every process of the terminal's group, run workers included. A run worker turns
SIGINT into Dagster's DagsterExecutionInterruptedError, raised wherever the interpreter is; when that is a cleanup
callback (a garbage-collected SQLAlchemy event collection, a `__del__`), Python cannot raise it there and prints
"Exception ignored in ..." with a traceback. Nothing is lost: Dagster still sees the interrupt and ends the run as
interrupted. This hook says so in one log line; any other unraisable exception goes to the previous hook.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

INTERRUPTS = frozenset({"DagsterExecutionInterruptedError", "KeyboardInterrupt"})

log = logging.getLogger("runtime_ops.interrupts")


def quiet_unraisable_interrupts() -> None:
    """Install the hook (idempotent)."""
    previous = sys.unraisablehook
    if getattr(previous, "runtime_ops", False):
        return

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if exc is not None and type(exc).__name__ in INTERRUPTS:
            where = getattr(unraisable.object, "__qualname__", None) or type(unraisable.object).__name__
            log.info(f"interrupted (Ctrl-C) inside a cleanup callback ({where}): the run ends as interrupted")
            return
        previous(unraisable)

    hook.runtime_ops = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook
