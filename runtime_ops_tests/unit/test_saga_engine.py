from __future__ import annotations

import copy

import pytest

from runtime_ops.saga.engine import CompensationFailed, SagaFailed, SagaState, Step, plan, run


class MemoryJournal:
    def __init__(self) -> None:
        self.states: dict[str, SagaState] = {}
        self.saves = 0

    def load(self, saga_id: str) -> SagaState | None:
        return copy.deepcopy(self.states.get(saga_id))

    def save(self, state: SagaState) -> None:
        self.saves += 1
        self.states[state.saga_id] = copy.deepcopy(state)


def _steps(log: list[str], fail_at: str | None = None, undo_fails: str | None = None) -> list[Step]:
    def make(name: str) -> Step:
        def do(ctx: dict) -> dict:
            if name == fail_at:
                raise RuntimeError(f"{name} broke")
            log.append(f"do {name}")
            return {f"{name}_done": True}

        def undo(ctx: dict, data: dict) -> None:
            if name == undo_fails:
                raise RuntimeError("cannot undo")
            assert data == {f"{name}_done": True}
            log.append(f"undo {name}")

        return Step(name, do, undo, describe=lambda ctx: f"{name} for {ctx['who']}")

    return [make(n) for n in ("alias", "index", "notify")]


def test_all_steps_run_once_and_a_rerun_does_nothing() -> None:
    log: list[str] = []
    journal = MemoryJournal()
    state = run("s1", _steps(log), {"who": "v2"}, journal)
    assert state.status == "done" and log == ["do alias", "do index", "do notify"]
    run("s1", _steps(log), {"who": "v2"}, journal)
    assert log == ["do alias", "do index", "do notify"]


@pytest.mark.parametrize(
    ("fail_at", "undone"), [("alias", []), ("index", ["undo alias"]), ("notify", ["undo index", "undo alias"])]
)
def test_a_failure_compensates_completed_steps_in_reverse(fail_at: str, undone: list[str]) -> None:
    log: list[str] = []
    journal = MemoryJournal()
    with pytest.raises(SagaFailed, match=f"step {fail_at} failed"):
        run("s1", _steps(log, fail_at=fail_at), {"who": "v2"}, journal)
    assert [x for x in log if x.startswith("undo")] == undone
    assert journal.states["s1"].status == "compensated"


def test_an_interrupted_saga_is_resumed_or_compensated() -> None:
    journal = MemoryJournal()
    journal.save(SagaState("s1", steps=[{"name": "alias", "status": "done", "data": {"alias_done": True}}]))
    log: list[str] = []
    assert run("s1", _steps(log), {"who": "v2"}, journal).status == "done"
    assert log == ["do index", "do notify"]  # the completed step is not repeated

    journal.save(SagaState("s2", steps=[{"name": "alias", "status": "done", "data": {"alias_done": True}}]))
    log = []
    assert run("s2", _steps(log), {"who": "v2"}, journal, resume=False).status == "compensated"
    assert log == ["undo alias"]


def test_a_failing_compensation_leaves_the_saga_for_an_operator() -> None:
    journal = MemoryJournal()
    with pytest.raises(CompensationFailed, match="compensation of alias failed"):
        run("s1", _steps([], fail_at="notify", undo_fails="alias"), {"who": "v2"}, journal)
    assert journal.states["s1"].status == "failed"
    with pytest.raises(CompensationFailed):
        run("s1", _steps([]), {"who": "v2"}, journal)


def test_plan_describes_without_running() -> None:
    log: list[str] = []
    assert plan(_steps(log), {"who": "v2"}) == ["alias: alias for v2", "index: index for v2", "notify: notify for v2"]
    assert log == []


def test_a_compensated_saga_can_be_attempted_again() -> None:
    journal = MemoryJournal()
    with pytest.raises(SagaFailed):
        run("s1", _steps([], fail_at="index"), {"who": "v2"}, journal)
    log: list[str] = []
    assert run("s1", _steps(log), {"who": "v2"}, journal).status == "done"
    assert log == ["do alias", "do index", "do notify"]
