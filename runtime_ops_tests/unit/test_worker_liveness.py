"""When a run's worker counts as gone: no process, a zombie, or a pid now carried by a younger process."""

from runtime_ops.recovery.workers import CLOCK_SLACK_S, ProcessInfo, Worker, gone_reason, stall_reason

WORKER = Worker(pid=4242, announced_at=1_000.0)


def test_a_missing_process_is_gone() -> None:
    reason = gone_reason(WORKER, ProcessInfo(4242, None))
    assert reason is not None and "pid 4242" in reason and "no longer exists" in reason


def test_a_zombie_has_exited() -> None:
    reason = gone_reason(WORKER, ProcessInfo(4242, 990.0, zombie=True))
    assert reason is not None and "exited" in reason


def test_the_worker_itself_is_alive() -> None:
    assert gone_reason(WORKER, ProcessInfo(4242, 999.0)) is None
    # Creation times are coarser than event timestamps: a process created just "after" its own event is it.
    assert gone_reason(WORKER, ProcessInfo(4242, 1_000.0 + CLOCK_SLACK_S)) is None


def test_a_reused_pid_is_not_the_worker() -> None:
    reason = gone_reason(WORKER, ProcessInfo(4242, 1_000.0 + CLOCK_SLACK_S + 30))
    assert reason is not None and "started after the worker" in reason


def test_a_live_worker_counts_as_stalled_only_after_its_run_was_silent_past_the_limit() -> None:
    assert stall_reason(last_event_at=100.0, now=150.0, limit_s=60.0) is None
    assert stall_reason(last_event_at=100.0, now=160.0, limit_s=60.0) is None  # exactly the limit: not yet
    reason = stall_reason(last_event_at=100.0, now=161.0, limit_s=60.0)
    assert reason is not None and "silent for 61 s" in reason and "RUNTIME_OPS_RUN_STALL_TIMEOUT: 60 s" in reason
    # Off (unset or 0): a silent run is never judged stalled.
    assert stall_reason(last_event_at=0.0, now=1e9, limit_s=None) is None
    assert stall_reason(last_event_at=0.0, now=1e9, limit_s=0.0) is None
