"""The candidate lifecycle's pure transitions: the legal path, the refusals that keep production behind the ramp, and
random sequences of requested moves that never break the invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_ops.lifecycle.machine import (
    APPROVED,
    ENDED,
    EVENTS,
    HALTED,
    PENDING,
    PROMOTED,
    PROMOTING,
    RAMPING,
    ROLLED_BACK,
    SUPERSEDED,
    Facts,
    Position,
    TransitionRefused,
    describe,
    initial,
    move,
)

RAMP = Facts(ramp_stages=2)


def test_the_path_through_a_declared_ramp() -> None:
    p = initial(approved_by_policy=False)
    assert p == Position(PENDING)
    p = move(p, "approve", RAMP)
    p = move(p, "ramp_start", RAMP)
    assert (p.state, p.stage, describe(p)) == (RAMPING, 0, "ramping (stage 1)")
    with pytest.raises(TransitionRefused, match="not the last"):
        move(p, "ramp_pass", RAMP)
    p = move(p, "ramp_advance", RAMP, stage=1)
    p = move(p, "ramp_pass", RAMP)
    assert move(p, "promoted", RAMP).state == PROMOTED


def test_nothing_launches_around_a_declared_ramp() -> None:
    approved = Position(APPROVED)
    person = Facts(ramp_stages=2, by_person=True)
    with pytest.raises(TransitionRefused, match="declares a ramp of 2 stage"):
        move(approved, "launch", person)
    with pytest.raises(TransitionRefused, match="approvals sensor launches"):
        move(approved, "launch", Facts(by_person=True, by_training_run=True))  # no ramp: still not the run's
    with pytest.raises(TransitionRefused, match="only once its promotion was launched"):
        move(approved, "promoted", person)
    with pytest.raises(TransitionRefused, match="only a person"):
        move(approved, "skip_ramp", RAMP)
    skipped = move(approved, "skip_ramp", person)
    assert (skipped.state, skipped.skip_ramp, describe(skipped)) == (PROMOTING, True, "promoting (ramp skipped)")
    # A first model has nothing to ramp against; a policy approval without a ramp is the training run's.
    assert move(approved, "launch", Facts(ramp_stages=2, first_model=True)).state == PROMOTING
    assert move(approved, "launch", Facts(by_training_run=True)).state == PROMOTING


def test_ended_candidates_stay_ended_and_say_why() -> None:
    for state in ENDED:
        with pytest.raises(TransitionRefused, match="it has ended"):
            move(Position(state), "approve", RAMP)
    with pytest.raises(TransitionRefused, match="cannot supersede a candidate that is promoting"):
        move(Position(PROMOTING), "supersede", RAMP)
    assert move(Position(RAMPING, 1), "ramp_loss", RAMP).state == ROLLED_BACK
    assert move(Position(PROMOTED), "rollback", RAMP).state == ROLLED_BACK
    assert move(Position(PROMOTED), "compensate", RAMP).state == PROMOTING
    assert move(Position(HALTED, 0), "supersede", RAMP).state == SUPERSEDED


FACTS = st.builds(
    Facts,
    ramp_stages=st.integers(0, 3),
    first_model=st.booleans(),
    by_person=st.booleans(),
    by_training_run=st.booleans(),
)
STEP = st.tuples(st.sampled_from(EVENTS), FACTS, st.none() | st.integers(0, 3))


@settings(max_examples=400, deadline=None)
@given(policy=st.booleans(), steps=st.lists(STEP, max_size=30))
def test_random_requests_never_skip_the_ramp_or_leave_an_end(policy: bool, steps: list) -> None:
    p = initial(approved_by_policy=policy)
    passed_ramp = skipped = launched_plain = False
    for event, facts, stage in steps:
        try:
            after = move(p, event, facts, stage=stage)
        except TransitionRefused as exc:
            assert exc.event == event and str(exc).startswith(f"cannot {event.replace('_', ' ')}")
            continue
        assert p.state not in ENDED  # nothing leaves an end
        if after.state == PROMOTING and p.state != PROMOTED:
            if event == "ramp_pass":
                assert p.state == RAMPING and p.stage == facts.ramp_stages - 1
                passed_ramp = True
            elif event == "skip_ramp":
                assert facts.by_person
                skipped = True
            else:  # a plain launch: only where no ramp is required, never a person's approval by the training run
                assert event == "launch" and (facts.ramp_stages == 0 or facts.first_model or p.skip_ramp)
                assert not (facts.by_person and facts.by_training_run)
                launched_plain = True
        if after.state == PROMOTED:
            assert p.state == PROMOTING and (passed_ramp or skipped or launched_plain)
        p = after


def test_a_ramp_declared_shorter_since_it_started_cannot_pass_from_beyond_its_end() -> None:
    # Found by the random test above: ramp_start with 2 stages, then the declaration became [] (or one stage);
    # passing from stage 1 (or 2) would promote without the declared ramp's last stage.
    started = move(initial(approved_by_policy=True), "ramp_start", Facts(ramp_stages=2))
    for shrunk in (0, 1):
        with pytest.raises(TransitionRefused, match="is not the last"):
            move(move(started, "ramp_advance", Facts(ramp_stages=2), stage=1), "ramp_pass", Facts(ramp_stages=shrunk))
    assert move(started, "ramp_pass", Facts(ramp_stages=1)).state == "promoting"  # stage 1 of 1 is the last
