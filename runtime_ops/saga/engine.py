"""A small saga engine: steps run in order, each with its compensation; state is persisted after every step.

Pure orchestration: the journal (where state is kept) and the steps are passed in. A failure runs the
compensations of the completed steps in reverse. A saga found `running` (its process died mid-way) is resumed
by the next run: completed steps are skipped, the rest run, or — when `resume` is False — everything completed
is compensated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Step:
    name: str
    do: Callable[[dict[str, Any]], dict[str, Any] | None]  # gets the saga context, returns data to remember
    undo: Callable[[dict[str, Any], dict[str, Any]], None]  # gets the context and what `do` returned
    describe: Callable[[dict[str, Any]], str] = lambda ctx: ""  # the planned transition, for dry runs


@dataclass
class SagaState:
    saga_id: str
    status: str = "running"  # running | done | compensating | compensated | failed
    steps: list[dict[str, Any]] = field(default_factory=list)  # [{name, status: done|compensated, data}]
    error: str | None = None

    def done_steps(self) -> list[dict[str, Any]]:
        return [s for s in self.steps if s["status"] == "done"]


class Journal(Protocol):
    def load(self, saga_id: str) -> SagaState | None: ...

    def save(self, state: SagaState) -> None: ...


class SagaFailed(RuntimeError):
    """A step failed and the completed steps were compensated; the message names the step and the cause."""


class CompensationFailed(RuntimeError):
    """A compensation itself failed: the saga is left `failed` for an operator (the message says which)."""


def plan(steps: Sequence[Step], ctx: dict[str, Any]) -> list[str]:
    """What running the saga would change, without changing anything (dry run)."""
    return [f"{s.name}: {s.describe(ctx) or '(no description)'}" for s in steps]


def run(
    saga_id: str,
    steps: Sequence[Step],
    ctx: dict[str, Any],
    journal: Journal,
    *,
    resume: bool = True,
    on_event: Callable[[str], None] = lambda _: None,
) -> SagaState:
    state = journal.load(saga_id)
    if state is not None and state.status == "done":
        on_event(f"saga {saga_id} already done: nothing to do")
        return state
    if state is not None and state.status == "compensated":
        # An earlier attempt failed and was rolled back completely: this is a fresh attempt.
        on_event(f"saga {saga_id} was compensated after: {state.error}; starting again")
        state = None
    if state is None:
        state = SagaState(saga_id)
        journal.save(state)
    elif state.status in ("running", "compensating"):
        on_event(f"saga {saga_id} was interrupted ({state.status}); {'resuming' if resume else 'compensating'}")
        if state.status == "compensating" or not resume:
            return _compensate(state, steps, ctx, journal, on_event, cause=state.error or "interrupted")
    elif state.status == "failed":
        raise CompensationFailed(f"saga {saga_id} needs an operator: {state.error}")
    done = {s["name"] for s in state.done_steps()}
    for step in steps:
        if step.name in done:
            ctx.update(_data(state, step.name) or {})
            continue
        try:
            data = step.do(ctx) or {}
        except Exception as exc:  # any step failure triggers compensation; re-raised below
            state.error = f"step {step.name} failed: {type(exc).__name__}: {exc}"
            on_event(state.error)
            _compensate(state, steps, ctx, journal, on_event, cause=state.error)
            raise SagaFailed(state.error + "; completed steps were compensated") from exc
        ctx.update(data)
        state.steps.append({"name": step.name, "status": "done", "data": data})
        journal.save(state)
        on_event(f"step {step.name} done")
    state.status = "done"
    journal.save(state)
    return state


def _data(state: SagaState, name: str) -> dict[str, Any] | None:
    for s in state.steps:
        if s["name"] == name:
            return s.get("data") or {}
    return None


def _compensate(
    state: SagaState,
    steps: Sequence[Step],
    ctx: dict[str, Any],
    journal: Journal,
    on_event: Callable[[str], None],
    *,
    cause: str,
) -> SagaState:
    state.status = "compensating"
    state.error = cause
    journal.save(state)
    by_name = {s.name: s for s in steps}
    for record in reversed(state.done_steps()):
        step = by_name.get(record["name"])
        if step is None:
            continue
        try:
            step.undo(ctx, record.get("data") or {})
        except Exception as exc:  # recorded and surfaced to the operator
            state.status = "failed"
            state.error = f"{cause}; compensation of {record['name']} failed: {type(exc).__name__}: {exc}"
            journal.save(state)
            raise CompensationFailed(state.error) from exc
        record["status"] = "compensated"
        journal.save(state)
        on_event(f"step {record['name']} compensated")
    state.status = "compensated"
    journal.save(state)
    return state
