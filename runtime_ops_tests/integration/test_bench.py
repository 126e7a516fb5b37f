"""The benchmark harness: partial runs merge into the report, the report's table, and the pipeline benchmark's
two sides doing the same work (a benchmark whose baseline did less would flatter the ratio)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import __main__ as harness
from bench.common import REGISTRY, BenchResult, Target, benchmark
from bench.load import extra_imports, parse_importtime


def _row(name: str, run_at: str | None = None) -> dict:
    row = {"name": name, "ours": 1.0, "baseline": 2.0, "ratio": 0.5, "unit": "s", "target": "ratio <= 1",
           "passed_target": True, "machine": {}, "details": {}}  # fmt: skip
    if run_at:
        row["run_at"] = run_at
    return row


def test_merge_replaces_the_rerun_benchmarks_rows_only() -> None:
    previous = [_row("locks.b"), _row("locks.a"), _row("load.code_location"), _row("loadtest.x"), _row("pipeline.old")]
    fresh = [_row("pipeline.ingest_per_doc@2000", "now")]
    merged = harness.merge(previous, fresh, ["pipeline"])
    assert [r["name"] for r in merged] == [
        "load.code_location",
        "loadtest.x",
        "locks.b",
        "locks.a",  # a benchmark's rows keep the order it reported them in
        "pipeline.ingest_per_doc@2000",
    ]
    # "load" re-run drops load.* rows but not those of a benchmark whose name merely starts with "load"
    assert [r["name"] for r in harness.merge(previous, [], ["load"])] == [
        "loadtest.x",
        "locks.b",
        "locks.a",
        "pipeline.old",
    ]


@pytest.fixture
def fake_benchmark():
    harness.discover()  # main() discovers too; register after it so the fake is not the only one

    @benchmark("zz_fake", "a benchmark of the harness test")
    def fake() -> list[BenchResult]:
        return [BenchResult("zz_fake.speed", 3.0, 2.0, "s", Target("ratio", "<=", 1.2), {"k": 1})]

    yield
    REGISTRY.pop("zz_fake", None)


def test_a_k_run_merges_into_existing_results_and_the_table_has_every_column(fake_benchmark, tmp_path: Path) -> None:
    (tmp_path / "latest.json").write_text(json.dumps([_row("locks.a", "2026-01-01 00:00:00 UTC"), _row("zz_fake.old")]))
    assert harness.main(["-k", "zz_fake", "--out", str(tmp_path)]) == 0

    rows = json.loads((tmp_path / "latest.json").read_text())
    assert [r["name"] for r in rows] == ["locks.a", "zz_fake.speed"]
    fresh = rows[1]
    assert (fresh["ratio"], fresh["passed_target"], fresh["target"]) == (1.5, False, "ratio <= 1.2")
    assert fresh["run_at"] and fresh["run_at"] != rows[0]["run_at"]

    md = (tmp_path / "latest.md").read_text()
    assert "| benchmark | ours | baseline | ratio | unit | target | met |" in md
    assert "| zz_fake.speed | 3 | 2 | 1.50x | s | ratio <= 1.2 | NO |" in md
    assert "| locks.a |" in md
    assert "locks at 2026-01-01 00:00:00 UTC" in md and "zz_fake at" in md  # which rows ran when


def test_a_k_run_into_an_empty_folder_writes_only_its_rows(fake_benchmark, tmp_path: Path) -> None:
    assert harness.main(["-k", "zz_fake", "--out", str(tmp_path / "sub")]) == 0
    rows = json.loads((tmp_path / "sub" / "latest.json").read_text())
    assert [r["name"] for r in rows] == ["zz_fake.speed"]
    assert (tmp_path / "sub" / "latest.md").read_text().count("\n| zz_fake") == 1


def test_every_benchmark_module_is_registered() -> None:
    harness.discover()
    assert {"approvals", "landing", "load", "locks", "pipeline"} <= set(REGISTRY)


def test_importtime_diff_lists_what_only_ours_imports() -> None:
    header = "import time: self [us] | cumulative | imported package\n"
    base = parse_importtime(header + "import time:       100 |        100 | dagster\n")
    ours = parse_importtime(
        header
        + "import time:       100 |        100 | dagster\n"
        + "import time:      3000 |       3000 |   numpy.core\n"
        + "import time:      2000 |       5000 | numpy\n"
        + "import time:       500 |        500 | runtime_ops.store\n"
    )
    extra = extra_imports(ours, base)
    assert extra["modules"] == 3
    assert extra["self_ms_total"] == 5.5
    assert list(extra["by_package_self_ms"].items()) == [("numpy", 5.0), ("runtime_ops", 0.5)]


def test_pipeline_sides_do_the_same_work(tmp_path: Path) -> None:
    """Both sides end with the same document statuses and chunks, and the Dagster side ran both steps."""
    from bench.pipeline import run_baseline, run_dagster, write_documents

    landing = tmp_path / "landing"
    assert write_documents(landing, 30) > 30 * 2000
    (tmp_path / "b").mkdir()
    (tmp_path / "o").mkdir()
    base = run_baseline(tmp_path / "b", landing, 30)
    ours = run_dagster(tmp_path / "o", landing, 30)
    assert base.statuses == ours.statuses == {"ok": 30}
    assert base.chunks == ours.chunks > 30
    assert {"step:demo__raw_documents", "step:demo__document_chunks"} <= set(ours.phases)
    assert ours.seconds > 0 and base.seconds > 0


def test_online_sensitivity_counts_a_decision_only_once_it_holds_for_twice_the_queries() -> None:
    from bench.online_sensitivity import Stop, checkpoints, race

    assert checkpoints(30) == [20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]
    issued = 0

    def simulate(n: int) -> None:
        nonlocal issued
        issued = n

    # A chance crossing at 22-23 falls back; from 100 on the interval stays above 0: the stop is the first
    # checkpoint from 100 on, not 22.
    def wavering() -> str:
        return "better" if 22 <= issued <= 23 or issued >= 100 else "no difference yet"

    never = race(simulate, {"wavering": wavering, "flat": lambda: "no difference yet"}, cap=1000)  # type: ignore[dict-item]
    settled = next(n for n in checkpoints(1000) if n >= 100)
    assert never == {"wavering": Stop(settled, "better"), "flat": Stop(1000, "no difference yet")}
