"""What served a search: the model version and index the query log records for a request id.

Responses no longer say it (a caller that knew the arm could steer the online gate), so tests that check which
model answered read it where the server keeps it, once the query log's writer has flushed the record.
"""

from __future__ import annotations

import time

from runtime_ops.store import StateStore


def served_from(store: StateStore, request_id: str, timeout_s: float = 30.0) -> tuple[int, int]:
    """(model version, index id) that answered `request_id`: the candidate's on a canary arm, else production's."""
    deadline = time.monotonic() + timeout_s
    while (logged := store.query_log.get(request_id)) is None:
        assert time.monotonic() < deadline, f"the query log never wrote {request_id}"
        time.sleep(0.05)
    record = logged.record
    if record["arm"] == "candidate":
        return int(record["candidate_version"]), int(record["candidate_index"])
    return int(record["production_version"]), int(record["production_index"])
