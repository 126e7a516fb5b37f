"""The ramp's stage machine: a stage that rules out a loss larger than max_loss with enough queries moves on (the last
one promotes), a loss rolls back whatever the stage, too few queries (or an interval too wide to rule out a loss)
wait until the deadline halts the ramp."""

from __future__ import annotations

import pytest

from runtime_ops.online.rollout_plan import StageEvidence, next_step

RAMP = (0.05, 0.25, 1.0)


MAX_LOSS = 0.05


def _evidence(verdict: str, queries: int = 600, low: float | None = -0.03) -> StageEvidence:
    return StageEvidence(verdict=verdict, queries=queries, min_queries=500, low=low)


@pytest.mark.parametrize("verdict", ["better", "no difference yet"])
def test_a_stage_without_loss_starts_the_next_share(verdict: str) -> None:
    step = next_step(0, RAMP, _evidence(verdict), overdue=False, max_loss=MAX_LOSS)
    assert (step.action, step.next_stage, step.next_share) == ("advance", 1, 0.25)
    assert "stage 1/3 (5% of sessions) passed" in step.reason and "600 queries" in step.reason


def test_the_last_stage_passing_promotes() -> None:
    step = next_step(2, RAMP, _evidence("better"), overdue=False, max_loss=MAX_LOSS)
    assert (step.action, step.next_stage, step.next_share) == ("promote", None, None)


@pytest.mark.parametrize("stage", [0, 1, 2])
@pytest.mark.parametrize("overdue", [False, True])
def test_a_loss_rolls_back_at_any_stage(stage: int, overdue: bool) -> None:
    worse = StageEvidence("worse", 600, 500, detail="positive-feedback rate 10/600 vs production's 90/600")
    step = next_step(stage, RAMP, worse, overdue=overdue, max_loss=MAX_LOSS)
    assert step.action == "roll back"
    assert "loses online (positive-feedback rate 10/600 vs production's 90/600; 600 queries" in step.reason


def test_no_difference_below_min_queries_does_not_pass() -> None:
    step = next_step(0, RAMP, _evidence("no difference yet", queries=499), overdue=False, max_loss=MAX_LOSS)
    assert step.action == "wait"


def test_too_few_queries_wait_then_halt_at_the_deadline() -> None:
    assert next_step(1, RAMP, _evidence("not enough queries", 20), overdue=False, max_loss=MAX_LOSS).action == "wait"
    halted = next_step(1, RAMP, _evidence("not enough queries", 20), overdue=True, max_loss=MAX_LOSS)
    assert halted.action == "halt"
    assert "max_duration" in halted.reason and "20 queries" in halted.reason


def test_evidence_that_passes_at_the_deadline_still_moves_on() -> None:
    assert next_step(0, RAMP, _evidence("better"), overdue=True, max_loss=MAX_LOSS).action == "advance"


def test_a_one_share_ramp_promotes_after_its_only_stage() -> None:
    assert next_step(0, (1.0,), _evidence("no difference yet"), overdue=False, max_loss=MAX_LOSS).action == "promote"


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="outside the ramp"):
        next_step(3, RAMP, _evidence("better"), overdue=False, max_loss=MAX_LOSS)
    with pytest.raises(ValueError, match="not one of"):
        StageEvidence(verdict="maybe", queries=1, min_queries=1)


def test_no_difference_whose_interval_allows_a_large_loss_does_not_pass() -> None:
    # A clearly worse candidate with too few queries to show it: 0.20 vs 0.35, interval [-0.31, +0.02] crosses 0.
    wide = StageEvidence("no difference yet", 40, 20, detail="positive-feedback rate 8/40 vs 14/40", low=-0.31)
    waiting = next_step(0, RAMP, wide, overdue=False, max_loss=MAX_LOSS)
    assert waiting.action == "wait"
    assert "a loss larger than max_loss 0.05 is not ruled out (the interval reaches -0.310)" in waiting.reason
    halted = next_step(0, RAMP, wide, overdue=True, max_loss=MAX_LOSS)
    assert halted.action == "halt" and "not ruled out" in halted.reason
    assert next_step(0, RAMP, wide, overdue=False, max_loss=0.35).action == "advance"  # a looser rule, stated


@pytest.mark.parametrize(("low", "action"), [(-0.05, "advance"), (-0.0501, "wait"), (None, "wait")])
def test_the_bound_is_inclusive_and_an_interval_is_needed(low: float | None, action: str) -> None:
    step = next_step(0, RAMP, _evidence("no difference yet", low=low), overdue=False, max_loss=MAX_LOSS)
    assert step.action == action


def test_max_loss_outside_its_range_is_named() -> None:
    with pytest.raises(ValueError, match="max_loss must be in"):
        next_step(0, RAMP, _evidence("better"), overdue=False, max_loss=1.0)
