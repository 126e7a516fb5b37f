"""Failpoints for fault-injection tests: `RUNTIME_OPS_FAILPOINTS="name=crash,other=raise,slow=sleep:0.5"`.

`crash` ends the process at once (as a SIGKILL or power loss would: no cleanup, no exception handlers);
`raise` raises FailpointError; `sleep:SECONDS` pauses there (widens a window a test wants to hit, e.g. to
kill a run worker between two committed batches). `once:<action>` acts at the first process to reach the
failpoint only (a marker file in RUNTIME_OPS_FAILPOINT_DIR, which must be set, records that it did): a retry of
the run passes, and a test sees from the marker that a worker is there now. Unset, a failpoint costs one
dictionary lookup.
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
    if action and action.startswith("once:"):
        action = action[len("once:") :] if _first_time(name) else None
    if action == "crash":
        os._exit(137)
    if action == "raise":
        raise FailpointError(f"failpoint {name} triggered")
    if action and action.startswith("sleep:"):
        time.sleep(float(action[len("sleep:") :]))


def _first_time(name: str) -> bool:
    folder = os.environ.get("RUNTIME_OPS_FAILPOINT_DIR")
    if not folder:
        raise FailpointError(f"failpoint {name}: a once: action needs RUNTIME_OPS_FAILPOINT_DIR (a folder)")
    try:
        fd = os.open(os.path.join(folder, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True
