"""Retrain + evaluation cost as the corpus grows: 10k, 100k and 300k chunks (BENCH_RETRAIN_SIZES="2000,10000").

Per size, two fresh interpreters (`bench/_retrain_child.py`), so each size's peak RSS is its own:

1. setup (untimed, its own process): a SQLite state store in a temp dir seeded in bulk with N synthetic chunks
   of the built-in `demo` pipeline (`bench/_synth.py`: 60-120 words each from a 30k-word Zipf vocabulary plus
   each document's topic words, 5-10 chunks per document, one ingested landing batch, documents `ok`); a
   production model trained the way `embedding_model` trains (lsa, the spec's dim / max_features, bounded
   sample) but with seed 1 and a 10k-chunk sample (BENCH_RETRAIN_PROD_SAMPLE; it is untimed and evaluation
   only reads its vectors), the `production` alias set to it, and every chunk embedded with it through
   `embed_missing` (so evaluation reads production from stored vectors, as in service).
2. timed (a second process on that store): `dg.materialize` of the pipeline's real `embedding_model`,
   `golden_questions` and `evaluation_report` assets (from `build_pipeline_defs(spec)`, the state store
   resource on the seeded SQLite file, a `DagsterInstance.local_temp` in a temp DAGSTER_HOME): train a new
   lsa candidate with the spec's defaults (train_sample 50k), build and store the question set, score the
   candidate (streamed: embeds every chunk) and production (stored vectors) and judge with the paired
   bootstrap. The clock is the wall time of that one `materialize` call (run and event-log writes included).

Measured: seconds per 1k chunks of the timed run, and the timed process's peak RSS (`ru_maxrss` of the
child, which by then holds nothing but imports, the definitions and the run; its RSS after imports is in the
details). Rows: per size, and the ratios 300k/100k and 100k/10k of both (targets: time per chunk <= 1.3x,
RSS <= 1.5x). Not measured: seeding and the production setup (their times are in the details), the gate's
asset checks (`meets_policy`, `human_approval`), the approval request and promotion, interpreter start-up.

Until the gate's `paired_bootstrap` / `changed_questions` and `runtime_ops.models.questions` are in the tree,
only `embedding_model` is materialized: the rows are then named `retrain.train_only.*` and the details say
what was missing. The machine may be shared (2 cores, other jobs): timings are wall time, CPU time is kept too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import BenchResult, Target, benchmark, server_env

SIZES = [int(x) for x in os.environ.get("BENCH_RETRAIN_SIZES", "10000,100000,300000").split(",") if x.strip()]
TIME_TARGET = 1.3  # time per chunk, bigger size / smaller size
RSS_TARGET = 1.5  # peak RSS, bigger size / smaller size
TIMEOUT_S = 3600


def _label(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def _child(*args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench._retrain_child", *args]
    proc = subprocess.run(cmd, env=server_env(), capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise RuntimeError(f"{' '.join(args[:1])} child exited with {proc.returncode}:\n{tail}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def measure(n: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"bench_retrain_{n}_"))
    try:
        setup = _child("setup", str(work), str(n))
        print(f"   {_label(n)}: setup {setup}", flush=True)
        db_mb = (work / "state.db").stat().st_size / 1e6
        run = _child("timed", str(work))
        print(f"   {_label(n)}: timed {run['seconds']}s, peak RSS {run['peak_rss_mb']} MB", flush=True)
        return {"n": n, "setup": setup, "run": run, "db_mb": round(db_mb, 1)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _per_1k(m: dict[str, Any]) -> float:
    return m["run"]["seconds"] * 1000 / m["n"]


@benchmark("retrain", "retrain + evaluation through the model assets at 10k/100k/300k chunks: time per chunk, RSS")
def retrain_scale() -> list[BenchResult]:
    runs = [measure(n) for n in sorted(SIZES)]
    scope = "retrain" if not runs[0]["run"]["evaluation_missing"] else "retrain.train_only"
    per_size = {
        _label(m["n"]): {
            "chunks": m["n"],
            "documents": m["setup"]["documents"],
            "s_per_1k_chunks": round(_per_1k(m), 4),
            "seconds": m["run"]["seconds"],
            "cpu_seconds": m["run"]["cpu_seconds"],
            "steps_s": m["run"]["steps_s"],
            "peak_rss_mb": m["run"]["peak_rss_mb"],
            "rss_after_imports_mb": m["run"]["rss_after_imports_mb"],
            "state_db_mb": m["db_mb"],
            "asset_metadata": m["run"]["metadata"],
            "setup_untimed": m["setup"],
        }
        for m in runs
    }
    common = {
        "assets": runs[0]["run"]["assets"],
        "evaluation_missing": runs[0]["run"]["evaluation_missing"] or None,
        "per_size": per_size,
        "machine_note": "2 cores, possibly shared with other jobs: wall times include contention",
    }
    rows: list[BenchResult] = []
    smallest = runs[0]
    for m in runs:
        lab = _label(m["n"])
        rows.append(
            BenchResult(
                f"{scope}.s_per_1k_chunks@{lab}",
                _per_1k(m),
                _per_1k(smallest),
                "s/1k chunks",
                Target("ratio", ">=", 0.0),  # informational: the ratio rows below carry the targets
                {"vs": f"baseline is the smallest size ({_label(smallest['n'])})", **per_size[lab]},
            )
        )
        rows.append(
            BenchResult(
                f"{scope}.peak_rss@{lab}",
                m["run"]["peak_rss_mb"],
                m["run"]["rss_after_imports_mb"],
                "MB",
                Target("ratio", ">=", 0.0),  # informational: baseline is the same process after its imports
                {"vs": "baseline is the timed process's RSS after imports, before the run"},
            )
        )
    pairs = [(runs[i], runs[i + 1]) for i in range(len(runs) - 1)]
    for small, big in reversed(pairs):
        span = f"{_label(big['n'])}_vs_{_label(small['n'])}"
        rows.append(
            BenchResult(
                f"{scope}.time_per_chunk.{span}",
                _per_1k(big),
                _per_1k(small),
                "s/1k chunks",
                Target("ratio", "<=", TIME_TARGET),
                common if big is runs[-1] else {},
            )
        )
        rows.append(
            BenchResult(
                f"{scope}.peak_rss.{span}",
                big["run"]["peak_rss_mb"],
                small["run"]["peak_rss_mb"],
                "MB",
                Target("ratio", "<=", RSS_TARGET),
            )
        )
    return rows
