"""Recovery times of the fault tests, shown in `make test`'s summary (section "recovery times").

pytest-xdist keeps a worker's output to itself; what a test records in its report's user_properties reaches the
controller, whose `pytest_terminal_summary` (conftest.py) prints it. Under `-s` the line also prints at once.
"""

from __future__ import annotations

from typing import Any

import pytest

PROPERTY = "recovery"


def report_recovery(capsys: pytest.CaptureFixture[str], scenario: str, seconds: float) -> None:
    line = f"{scenario}: {seconds:.1f} s"
    item = capsys.request.node
    assert isinstance(item, pytest.Item), "report_recovery is called from a test"
    item.user_properties.append((PROPERTY, line))
    with capsys.disabled():
        print(f"\nrecovery: {line}", flush=True)


def summary_lines(reports: list[Any]) -> list[str]:
    return [
        str(value) for report in reports for name, value in getattr(report, "user_properties", []) if name == PROPERTY
    ]
