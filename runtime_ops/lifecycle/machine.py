"""The candidate lifecycle as pure transitions (no I/O): which move an actor may request from which state, and why
a move is refused. The store's one writer (`store/approvals/lifecycle.py`) applies a move in the transaction of the
event behind it, with its audit record.

    pending ─approve─▶ approved ─ramp_start─▶ ramping(0) ─ramp_advance─▶ ramping(i) ─ramp_pass─▶ promoting
                                                                              promoting ─promoted─▶ promoted
       │                  │  └──launch (no ramp declared, a first model, or a person's skip)──▶ promoting
       │                  └──skip_ramp (a person, audited)──▶ promoting ◀──skip_ramp── ramping / halted
       ├─reject─▶ rejected        ramping ─ramp_loss─▶ rolled_back      ramping ─halt / stop─▶ halted
       ├─expire─▶ expired         promoted ─rollback─▶ rolled_back
       └─supersede─▶ superseded   (from pending, approved, ramping or halted: a newer candidate was evaluated)
    promoted ─compensate─▶ promoting  (the promotion saga undid its own alias move; it is tried again)

Production moves only on `promoted` (the promotion saga) and on `rollback`. When the pipeline declares a ramp, an
approved candidate reaches `promoting` only through the ramp's last stage or a person's explicit skip; the training
run never launches a person-approved candidate (the approvals sensor does, after the ramp).
"""

from __future__ import annotations

from dataclasses import dataclass

PENDING, APPROVED, RAMPING, PROMOTING, PROMOTED = "pending", "approved", "ramping", "promoting", "promoted"
REJECTED, EXPIRED, SUPERSEDED, ROLLED_BACK, HALTED = "rejected", "expired", "superseded", "rolled_back", "halted"

STATES = (PENDING, APPROVED, RAMPING, PROMOTING, PROMOTED, REJECTED, EXPIRED, SUPERSEDED, ROLLED_BACK, HALTED)
# No move leaves these (a halted ramp may still be skipped by a person: it is held, not ended).
ENDED = frozenset({REJECTED, EXPIRED, SUPERSEDED, ROLLED_BACK})
# A candidate that may still reach production: what the approvals sensor works on.
IN_FLIGHT = frozenset({APPROVED, RAMPING, PROMOTING})

EVENTS = (
    "approve",
    "reject",
    "expire",
    "supersede",
    "ramp_start",
    "ramp_advance",
    "ramp_pass",
    "ramp_loss",
    "halt",
    "launch",
    "skip_ramp",
    "promoted",
    "rollback",
    "compensate",
)


@dataclass(frozen=True)
class Facts:
    """What a guard needs to know beyond the state: the pipeline's declared ramp (number of stages, 0: none), whether
    the candidate is a first model (no production to ramp against), whether a person decided it, and whether the
    actor asking is the training run (which may launch only what a policy approved)."""

    ramp_stages: int = 0
    first_model: bool = False
    by_person: bool = False
    by_training_run: bool = False


@dataclass(frozen=True)
class Position:
    """Where a candidate is: its state, its ramp stage (while ramping) and whether a person chose to skip the ramp."""

    state: str
    stage: int | None = None
    skip_ramp: bool = False


class TransitionRefused(ValueError):
    """An illegal move: the message names the state, the move and what is possible instead."""

    def __init__(self, position: Position, event: str, why: str) -> None:
        super().__init__(f"cannot {event.replace('_', ' ')} a candidate that is {describe(position)}: {why}")
        self.position = position
        self.event = event
        self.why = why


def describe(position: Position) -> str:
    """A state in words, as every channel shows it ("ramping (stage 2)", "approved (ramp skipped)")."""
    if position.state == RAMPING and position.stage is not None:
        return f"ramping (stage {position.stage + 1})"
    if position.skip_ramp and position.state in (APPROVED, PROMOTING, PROMOTED):
        return f"{position.state} (ramp skipped)"
    return position.state.replace("_", " ")


def initial(*, approved_by_policy: bool) -> Position:
    """A request opens pending for a person, or approved when the policy decided it at once."""
    return Position(APPROVED if approved_by_policy else PENDING)


def ramp_required(position: Position, facts: Facts) -> bool:
    """Whether this candidate must pass the declared ramp before production moves."""
    return facts.ramp_stages > 0 and not facts.first_model and not position.skip_ramp


def move(position: Position, event: str, facts: Facts, *, stage: int | None = None) -> Position:
    """The position after `event`, or TransitionRefused. `stage` is the stage a ramp_advance reaches."""
    state = position.state

    def refuse(why: str) -> TransitionRefused:
        return TransitionRefused(position, event, why)

    if event not in EVENTS:
        raise refuse(f"unknown move (one of {', '.join(EVENTS)})")
    if state in ENDED:
        raise refuse("it has ended; a new candidate starts a new request")
    if event == "supersede":
        if state in (PROMOTING, PROMOTED):
            raise refuse("its promotion was launched; a newer candidate replaces it by its own promotion")
        return Position(SUPERSEDED, None, position.skip_ramp)
    if event in ("approve", "reject", "expire"):
        if state != PENDING:
            raise refuse("only a pending request is decided")
        target = {"approve": APPROVED, "reject": REJECTED, "expire": EXPIRED}[event]
        return Position(target)
    if event == "launch":
        if state != APPROVED:
            raise refuse("only an approved candidate is launched")
        if facts.by_training_run and facts.by_person:
            raise refuse("a person approved it: the approvals sensor launches its promotion, after the ramp if any")
        if ramp_required(position, facts):
            raise refuse(
                f"the pipeline declares a ramp of {facts.ramp_stages} stage(s): it promotes after the last stage "
                "(or a person skips it explicitly: --skip-ramp)"
            )
        return Position(PROMOTING, None, position.skip_ramp)
    if event == "skip_ramp":
        if not facts.by_person:
            raise refuse("only a person may skip a ramp")
        if state not in (APPROVED, RAMPING, HALTED):
            raise refuse("only an approved, ramping or halted candidate can skip its ramp")
        return Position(PROMOTING, None, True)
    if event == "ramp_start":
        if state != APPROVED:
            raise refuse("a ramp starts after approval")
        if not ramp_required(position, facts):
            raise refuse("no ramp is required (none declared, a first model, or skipped)")
        return Position(RAMPING, 0)
    if event in ("ramp_advance", "ramp_pass", "ramp_loss"):
        if state != RAMPING or position.stage is None:
            raise refuse("it is not ramping")
        if event == "ramp_loss":
            return Position(ROLLED_BACK, position.stage)
        last = facts.ramp_stages - 1
        if event == "ramp_pass":
            if position.stage != last:  # before the last, or beyond a declared ramp that shrank since it started
                raise refuse(f"stage {position.stage + 1} of {facts.ramp_stages} is not the last")
            return Position(PROMOTING)
        if stage is None or stage != position.stage + 1 or stage > last:
            raise refuse(f"the next stage after {position.stage + 1} of {facts.ramp_stages} is not {stage}")
        return Position(RAMPING, stage)
    if event == "halt":
        if state != RAMPING:
            raise refuse("only a ramp is halted")
        return Position(HALTED, position.stage)
    if event == "promoted":
        if state != PROMOTING:
            raise refuse("production moves only once its promotion was launched (after the ramp, if required)")
        return Position(PROMOTED, None, position.skip_ramp)
    if event == "compensate":
        if state != PROMOTED:
            raise refuse("only a promotion whose saga undid its alias move is compensated")
        return Position(PROMOTING, None, position.skip_ramp)
    # rollback
    if state != PROMOTED:
        raise refuse("only the candidate in production is rolled back (a ramping one is halted or loses)")
    return Position(ROLLED_BACK, None, position.skip_ramp)
