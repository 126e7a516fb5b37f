"""The child processes of the retrain_scale benchmark (one fresh interpreter per phase and size).

    python -m bench._retrain_child setup <workdir> <n_chunks>   seed the store, train + promote + embed production
    python -m bench._retrain_child timed <workdir>              materialize embedding_model, golden_questions,
                                                                evaluation_report against that store

Each prints one JSON line (prefixed RESULT) on stdout: timings, and its own RSS after imports and peak RSS.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def evaluation_available() -> tuple[bool, str]:
    """Whether the evaluation path can run in this tree (the gate's interval and the question generator land on
    another branch): (available, what is missing)."""
    import importlib.util

    from runtime_ops.policies import bootstrap, changed_questions

    missing = [
        name
        for module, name in ((bootstrap, "paired_bootstrap"), (changed_questions, "changed_questions"))
        if not hasattr(module, name)
    ]
    if importlib.util.find_spec("runtime_ops.models.questions") is None:
        missing.append("runtime_ops.models.questions")
    return not missing, ", ".join(missing)


def setup(work: Path, n: int) -> dict[str, Any]:
    from bench._synth import make_production, seed_corpus

    url = f"sqlite:///{work / 'state.db'}"
    t0 = time.perf_counter()
    seeded = seed_corpus(url, n)
    t1 = time.perf_counter()
    # Production's own fit is untimed setup: a smaller sample (BENCH_RETRAIN_PROD_SAMPLE) keeps setup short; its
    # vectors have the spec's dim either way, which is all the timed evaluation reads of it.
    prod = make_production(url, train_sample=int(os.environ.get("BENCH_RETRAIN_PROD_SAMPLE", "10000")))
    return {"seed_s": round(t1 - t0, 2), "chunks": seeded.chunks, "documents": seeded.documents,
            "words": seeded.words, **prod}  # fmt: skip


def timed(work: Path) -> dict[str, Any]:
    # Everything the run imports, imported before the baseline RSS is read.
    import dagster as dg
    import numpy  # noqa: F401
    import sklearn.feature_extraction.text  # noqa: F401

    import runtime_ops.models.metrics  # noqa: F401
    from bench._synth import PIPELINE, peak_rss_mb, rss_mb
    from runtime_ops.components.build import build_pipeline_defs
    from runtime_ops.components.loading import get_spec
    from runtime_ops.resources.state_store import StateStoreResource
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store

    ok, missing = evaluation_available()
    url = f"sqlite:///{work / 'state.db'}"
    spec = get_spec(PIPELINE)
    defs = build_pipeline_defs(spec)
    by_name = {a.key.path[-1]: a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)}
    names = ["embedding_model", "golden_questions", "evaluation_report"] if ok else ["embedding_model"]
    home = work / "dagster_home"
    home.mkdir(exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    instance = dg.DagsterInstance.local_temp(tempdir=str(home))
    resources = {"state": StateStoreResource(database_url=url)}
    base_rss = rss_mb()
    base_peak = peak_rss_mb()
    t0 = time.perf_counter()
    c0 = time.process_time()
    result = dg.materialize([by_name[n] for n in names], instance=instance, resources=resources, raise_on_error=False)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    peak = peak_rss_mb()
    if not result.success:
        errors = [str(e.event_specific_data.error.message) for e in result.all_events if e.is_step_failure]  # type: ignore[union-attr]
        raise RuntimeError(f"the retrain run failed: {errors}")
    steps = {
        s.step_key: round((s.end_time or 0) - (s.start_time or 0), 2)
        for s in instance.get_run_step_stats(result.run_id)
    }
    meta: dict[str, Any] = {}
    for mat in result.get_asset_materialization_events():
        m = mat.materialization
        keep = ("train_seconds", "fitted_on_chunks", "gating_questions", "evaluation_seconds", "verdict", "seconds",
                "chunks", "version")  # fmt: skip
        meta[m.asset_key.path[-1]] = {k: getattr(v, "value", v) for k, v in m.metadata.items() if k in keep}
    store = open_store(url, get_settings(), pipeline=PIPELINE)
    candidate = store.registry.alias("candidate")
    instance.dispose()
    return {
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "steps_s": steps,
        "assets": names,
        "evaluation_missing": missing,
        "candidate_version": candidate,
        "rss_after_imports_mb": round(base_rss, 1),
        "peak_before_run_mb": round(base_peak, 1),
        "peak_rss_mb": round(peak, 1),
        "metadata": meta,
    }


def main(argv: list[str]) -> int:
    mode, work = argv[0], Path(argv[1])
    out = setup(work, int(argv[2])) if mode == "setup" else timed(work)
    print("RESULT " + json.dumps(out, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
