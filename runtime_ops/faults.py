"""Failpoints for fault-injection tests: `RUNTIME_OPS_FAILPOINTS="name=crash,other=raise,slow=sleep:0.5"`.

`crash` ends the process at once (as a SIGKILL or power loss would: no cleanup, no exception handlers);
`raise` raises FailpointError; `sleep:SECONDS` pauses there (widens a window a test wants to hit, e.g. to
kill a run worker between two committed batches). Unset, a failpoint costs one dictionary lookup.
"""

from __future__ import annotations

import os
import time


class FailpointError(RuntimeError):
    pass


def failpoint(name: str) -> None:
    spec = os.environ.get("RUNTIME_OPS_FAILPOINTS")
    if not spec:
        return
    actions = dict(item.split("=", 1) for item in spec.split(",") if "=" in item)
    action = actions.get(name)
    if action == "crash":
        os._exit(137)
    if action == "raise":
        raise FailpointError(f"failpoint {name} triggered")
    if action and action.startswith("sleep:"):
        time.sleep(float(action[len("sleep:") :]))
