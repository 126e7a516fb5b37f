"""Code-location load time: runtime_ops.definitions against a one-asset Definitions, each in a fresh process.

What a gRPC code server (`dagster api grpc -m <module>`, also what `dagster dev` starts per location) does
before it can answer the webserver, done by a fresh `python -c` child with Dagster's own functions:

1. import Dagster's code-server machinery (`dagster._grpc.server`; the same for both modules),
2. `LoadedRepositories(LoadableTargetOrigin(module_name=...))`: import the module, find its `Definitions`,
   build the repository and `load_all_definitions()` (what the server does at start-up),
3. `RepositorySnap.from_def` + `serialize_value`: the snapshot the webserver asks for first.

Two measures per child, both up to the moment it is ready (interpreter start-up included, tear-down not):
its CPU time (user + system, `time.process_time()` in the child) and the wall time from starting it to
reading its report line. Loading is single-threaded and reads cached files, so on an idle machine the two
agree; on a shared one the wall time also counts the time other processes held the CPU, so the CPU row is the
one to compare across runs. **ours** loads `runtime_ops.definitions`; the **baseline** loads
`bench._one_asset` (one asset, nothing else), so the ratio is what runtime_ops adds to Dagster's own start.
Runs alternate between the two (BENCH_LOAD_RUNS each, default 7, after one untimed warm-up of each so both
read .pyc files from the page cache); the medians are reported. Each child runs in a clean environment
(no RUNTIME_OPS_*/DAGSTER_* variables from the shell, a temporary RUNTIME_OPS_HOME and DAGSTER_HOME).

For where the difference goes, one more child per module runs with `python -X importtime`: the details list
the modules only runtime_ops' load imports, heaviest first (cumulative import time of top-level packages).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import BenchResult, Target, benchmark, server_env

RUNS = int(os.environ.get("BENCH_LOAD_RUNS", "7"))
TARGET = 1.3
OURS = "runtime_ops.definitions"
BASELINE = "bench._one_asset"
ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
wall0, t0 = time.time(), time.perf_counter()
from dagster._core.origin import get_python_environment_entry_point
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._grpc.server import LoadedRepositories
from dagster._serdes import serialize_value
t1 = time.perf_counter()
origin = LoadableTargetOrigin(executable_path=sys.executable, module_name=sys.argv[1], working_directory=sys.argv[2])
repos = LoadedRepositories(origin, None, get_python_environment_entry_point(sys.executable), None)
t2 = time.perf_counter()
snaps = [serialize_value(RepositorySnap.from_def(r)) for r in repos.definitions_by_name.values()]
t3 = time.perf_counter()
cpu = time.process_time()  # CPU seconds of this process so far, interpreter start-up included
report = {"wall0": wall0, "cpu": cpu, "dagster_import": t1 - t0, "load": t2 - t1, "snapshot": t3 - t2,
          "assets": sum(len(r.assets_defs_by_key) for r in repos.definitions_by_name.values()),
          "snapshot_bytes": sum(len(s) for s in snaps), "modules": len(sys.modules)}
sys.stdout.write(json.dumps(report) + "\\n")
sys.stdout.flush()
"""


def _env(home: Path) -> dict[str, str]:
    return server_env(RUNTIME_OPS_HOME=str(home / "runtime_ops"), DAGSTER_HOME=str(home / "dagster"))


def load_once(module: str, env: dict[str, str], *, importtime: bool = False) -> tuple[dict[str, Any], str]:
    """One fresh child loading `module`; (its report with `total` added, its stderr)."""
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", CHILD, module, str(ROOT)]
    # stderr goes to a file, not a pipe: -X importtime writes far more than a pipe buffer holds, and a child
    # blocked on a full stderr pipe would never write the stdout line read here.
    with tempfile.TemporaryFile("w+") as errfile:
        start_wall, start = time.time(), time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errfile, text=True
        )
        line = proc.stdout.readline() if proc.stdout else ""
        total = time.perf_counter() - start
        proc.communicate(timeout=300)
        errfile.seek(0)
        err = errfile.read()
    if proc.returncode != 0 or not line:
        raise RuntimeError(f"loading {module} failed ({proc.returncode}):\n{err[-3000:]}")
    report = json.loads(line)
    report["interpreter_start"] = report.pop("wall0") - start_wall
    report["total"] = total
    return report, err


def parse_importtime(stderr: str) -> dict[str, tuple[int, int]]:
    """`-X importtime` lines as {module: (self µs, cumulative µs)}."""
    out: dict[str, tuple[int, int]] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        try:
            self_us, cum_us, name = (p.strip() for p in line[len("import time:") :].split("|"))
            out[name.strip()] = (int(self_us), int(cum_us))
        except ValueError:
            continue
    return out


def extra_imports(ours: dict[str, tuple[int, int]], base: dict[str, tuple[int, int]], top: int = 12) -> dict[str, Any]:
    """What only our load imports: self time summed per top-level package, heaviest first, in ms."""
    only = {m: v for m, v in ours.items() if m not in base}
    by_package: dict[str, int] = defaultdict(int)
    for module, (self_us, _) in only.items():
        by_package[module.split(".")[0]] += self_us
    heaviest = sorted(by_package.items(), key=lambda kv: -kv[1])[:top]
    return {
        "modules": len(only),
        "self_ms_total": round(sum(v[0] for v in only.values()) / 1000, 1),
        "by_package_self_ms": {k: round(v / 1000, 1) for k, v in heaviest},
    }


def _median(reports: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in reports)


@benchmark("load", "code-location load in a fresh process: runtime_ops.definitions vs a one-asset Definitions")
def load_time() -> list[BenchResult]:
    with tempfile.TemporaryDirectory(prefix="bench_load_") as tmp:
        home = Path(tmp)
        (home / "dagster").mkdir()
        env = _env(home)
        for module in (BASELINE, OURS):  # warm-up: .pyc files compiled and in the page cache
            load_once(module, env)
        ours: list[dict[str, Any]] = []
        base: list[dict[str, Any]] = []
        for r in range(RUNS):
            for module in (BASELINE, OURS) if r % 2 == 0 else (OURS, BASELINE):
                (ours if module == OURS else base).append(load_once(module, env)[0])
        _, ours_err = load_once(OURS, env, importtime=True)
        _, base_err = load_once(BASELINE, env, importtime=True)

    phases = ("interpreter_start", "dagster_import", "load", "snapshot")
    return [
        BenchResult(
            "load.code_location.cpu",
            _median(ours, "cpu"),
            _median(base, "cpu"),
            "s",
            Target("ratio", "<=", TARGET),
            {
                "measure": "CPU seconds (user + system) of the child until ready, median",
                "ours_cpu_s": [round(r["cpu"], 3) for r in ours],
                "baseline_cpu_s": [round(r["cpu"], 3) for r in base],
            },
        ),
        BenchResult(
            "load.code_location.wall",
            _median(ours, "total"),
            _median(base, "total"),
            "s",
            Target("ratio", "<=", TARGET),
            {
                "measure": "wall seconds from starting the child to its report line, median",
                "ours": f"{OURS}: LoadedRepositories (import, Definitions, load_all_definitions) + RepositorySnap",
                "baseline": f"{BASELINE}: the same for one asset in one Definitions",
                "runs": RUNS,
                "ours_s": [round(r["total"], 3) for r in ours],
                "baseline_s": [round(r["total"], 3) for r in base],
                "ours_phases_s": {p: round(_median(ours, p), 3) for p in phases},
                "baseline_phases_s": {p: round(_median(base, p), 3) for p in phases},
                "assets": {"ours": ours[0]["assets"], "baseline": base[0]["assets"]},
                "modules_loaded": {"ours": ours[0]["modules"], "baseline": base[0]["modules"]},
                "snapshot_bytes": {"ours": ours[0]["snapshot_bytes"], "baseline": base[0]["snapshot_bytes"]},
                "only_ours_imports": extra_imports(parse_importtime(ours_err), parse_importtime(base_err)),
            },
        ),
    ]
