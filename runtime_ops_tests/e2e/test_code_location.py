"""The code location loads the same way for `dagster`, `dg` and a gRPC code server, without heavy imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNTIME_OPS_", "SLACK_", "DAGSTER_HOME"))}
    env.update({"RUNTIME_OPS_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster"), **extra})
    (tmp_path / "dagster").mkdir(exist_ok=True)
    return env


@pytest.mark.parametrize(
    "command",
    [
        [str(BIN / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        [str(BIN / "dg"), "check", "defs"],
    ],
    ids=["dagster-definitions-validate", "dg-check-defs"],
)
def test_definitions_validate(command: list[str], tmp_path: Path) -> None:
    proc = subprocess.run(command, cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_wrong_setting_fails_at_load_naming_the_variable(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(BIN / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=_env(tmp_path, REDIS_URL="http://not-redis:6379"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "REDIS_URL" in proc.stdout + proc.stderr


def test_loading_the_code_location_imports_no_heavy_library(tmp_path: Path) -> None:
    code = (
        "import sys, runtime_ops.definitions\n"
        "heavy = ('sklearn', 'scipy', 'numpy', 'boto3', 'botocore', 'pypdf', 'dagster_aws',\n"
        "         'lancedb', 'pyarrow', 'torch')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def _default_signals() -> None:
    """In the server's process before exec: SIGTERM as a fresh process has it. An ignored disposition and a blocked
    mask survive exec, and a pytest worker that ran Dagster jobs in-process may hold either (in two full runs the
    server never saw the SIGTERM: no "Stopping server" line in its log)."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})


def test_grpc_code_server_serves_the_location(tmp_path: Path) -> None:
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _env(tmp_path)
    # The server's output goes to a file: a pipe nobody reads fills up (64 KB) and blocks the server's next log
    # write, so it could neither answer nor stop.
    log = tmp_path / "code_server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(BIN / "dagster"), "api", "grpc", "-m", "runtime_ops.definitions", "-h", "127.0.0.1", "-p", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_default_signals,
        )
    try:
        deadline = time.monotonic() + 120
        ok = False
        while time.monotonic() < deadline and not ok:
            ping = subprocess.run(
                [str(BIN / "dagster"), "api", "grpc-health-check", "-p", str(port), "--host", "127.0.0.1"],
                env=env,
                capture_output=True,
                text=True,
            )
            ok = ping.returncode == 0
            if not ok:
                assert server.poll() is None, log.read_text()
                time.sleep(1)
        assert ok, f"the gRPC code server never answered its health check: {log.read_text()[-2000:]}"
    finally:
        server.terminate()
        # Dagster's code server stops "once all current RPC calls terminate or 60 seconds pass": a server that
        # outlives that grace is stuck.
        try:
            server.wait(timeout=90)
        except subprocess.TimeoutExpired:
            server.kill()
            raise AssertionError(f"the code server did not stop on SIGTERM: {log.read_text()[-2000:]}") from None


def _dg_json(args: list[str], tmp_path: Path) -> dict:
    import json

    proc = subprocess.run(
        [str(BIN / "dg"), *args, "--json"], cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_dg_lists_the_demo_pipeline_built_by_the_component(tmp_path: Path) -> None:
    components = {c["key"] for c in _dg_json(["list", "components"], tmp_path)["items"]}
    assert {
        "runtime_ops.components.RetrievalPipeline",
        "runtime_ops.components.InferencePipeline",
        "runtime_ops.components.ApprovalGate",
    } <= components
    defs = _dg_json(["list", "defs"], tmp_path)
    assets = {a["asset_key"]: a for a in defs["assets"]}
    names = "raw_documents document_chunks embedding_model golden_questions evaluation_report production_model"
    names += " document_embeddings shadow_embeddings retrieval_index rag_answers production_evaluation"
    tickets = {"tickets/ticket_labels", "tickets/published_labels"}  # the example inference pipeline
    assert set(assets) == {f"demo/{n}" for n in names.split()} | tickets
    # Every one of them comes from its pipeline's declaration.
    sources = {key: a["source"].split(":")[0] for key, a in assets.items()}
    assert {sources[key] for key in set(assets) - tickets} == {"runtime_ops/defs/demo/defs.yaml"}
    assert {sources[key] for key in tickets} == {"runtime_ops/defs/tickets/defs.yaml"}
    assert {c["key"] for c in defs["asset_checks"]} == {
        "demo/evaluation_report:human_approval",
        "demo/evaluation_report:meets_policy",
        "demo/production_evaluation:no_regression",
        "tickets/ticket_labels:approval",  # the ApprovalGate of defs/tickets_gate
    }
    jobs = "ingest_job train_job promotion_job index_job regression_job rollback_job reembed_job"
    jobs += " query_log_retention_job"
    assert {j["name"] for j in defs["jobs"]} >= {f"demo__{j}" for j in jobs.split()} | {
        "tickets__ticket_labels__on_approval"
    }
    assert {s["name"] for s in defs["sensors"]} == {
        "automation_sensor",
        "run_recovery_sensor",
        *(f"demo__{s}" for s in ("landing_sensor", "corpus_sensor", "approvals_sensor", "alert_sensor")),
        "tickets__landing_sensor",
        "tickets__ticket_labels__approval_sensor",
    }
    assert {s["name"] for s in defs["schedules"]} == {
        "demo__retrain_schedule",
        "demo__regression_schedule",
        "demo__query_log_retention_schedule",
        "tickets__label_schedule",
    }
