"""A Ctrl-C that lands in a cleanup callback is one log line, not "Exception ignored in ..." and a traceback; any
other unraisable exception is still printed in full."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc, logging, sys
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
from runtime_ops.observability.interrupts import quiet_unraisable_interrupts
quiet_unraisable_interrupts()
quiet_unraisable_interrupts()  # idempotent

class DagsterExecutionInterruptedError(BaseException):
    pass

class Interrupted:
    def __del__(self):
        raise DagsterExecutionInterruptedError()

class Broken:
    def __del__(self):
        raise ValueError("a real bug")

Interrupted()
gc.collect()
Broken()
gc.collect()
"""


def test_an_interrupt_in_a_cleanup_callback_is_one_line_other_errors_keep_their_traceback() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    lines = done.stderr.splitlines()
    interrupted = [line for line in lines if "interrupted (Ctrl-C) inside a cleanup callback" in line]
    assert len(interrupted) == 1 and "Interrupted.__del__" in interrupted[0], done.stderr
    assert "DagsterExecutionInterruptedError" not in done.stderr  # no traceback for it
    assert sum("Traceback (most recent call last)" in line for line in lines) == 1  # the real bug's, in full
    assert "ValueError: a real bug" in done.stderr
