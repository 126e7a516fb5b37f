"""When the landing sensor relaunches a batch whose ingestion run failed (runtime_ops/documents/batch_runs.py)."""

from runtime_ops.documents.batch_runs import MAX_LAUNCHES, BatchRun, decide, relaunch_key


def test_a_batch_in_flight_succeeded_cancelled_or_being_retried_is_left_alone() -> None:
    for status in ("QUEUED", "NOT_STARTED", "STARTING", "STARTED", "SUCCESS", "CANCELED", "CANCELING"):
        assert decide([BatchRun(status)]) == "wait", status
    assert decide([BatchRun("FAILURE", will_retry="true")]) == "wait"  # Dagster's run retries will take it


def test_a_final_failure_is_relaunched_until_the_sensor_launched_it_max_times() -> None:
    failed = BatchRun("FAILURE", will_retry="false")
    assert decide([failed]) == "relaunch"
    assert decide([BatchRun("FAILURE")]) == "relaunch"  # run retries off: no tag at all
    # Dagster's own retries of a launch are not launches of the sensor's.
    retried = [BatchRun("FAILURE", "false", is_retry=True), BatchRun("FAILURE", "false", is_retry=True), failed]
    assert decide(retried) == "relaunch"
    assert decide([failed] * (MAX_LAUNCHES - 1)) == "relaunch"
    assert decide([failed] * MAX_LAUNCHES) == "give_up"


def test_each_launch_has_a_run_key_of_its_own() -> None:
    failed = BatchRun("FAILURE", will_retry="false")
    assert relaunch_key("b1", [failed]) == "b1:launch2"
    assert relaunch_key("b1", [failed, BatchRun("FAILURE", "false", is_retry=True), failed]) == "b1:launch3"
    assert decide([]) == "relaunch" and relaunch_key("b1", []) == "b1:launch1"
