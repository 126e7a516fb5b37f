"""Client spans on real servers (moto's S3 and SQS through boto3, the model endpoint through httpx), and an
unreachable OTLP collector that must neither crash nor hold up a process."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from runtime_ops.http import Backoff
from runtime_ops.landing import ObjectGone, open_landing
from runtime_ops.observability import tracing
from runtime_ops.serving.endpoint import ChatEndpoint
from runtime_ops_tests.support.fault_server import FaultServer, ok, status
from runtime_ops_tests.support.servers import free_port


@pytest.fixture
def spans() -> Iterator[Any]:
    exporter = tracing.install_memory_exporter()
    exporter.clear()
    yield exporter
    exporter.clear()


def test_a_landing_read_from_s3_makes_client_spans(s3_bucket, aws_env, spans) -> None:
    _, bucket = s3_bucket
    source = open_landing(f"s3://{bucket}/incoming", endpoint_url=aws_env.endpoint_url)
    source.put("a/b.md", b"# hello")
    [[listed]] = list(source.iter_pages())
    assert source.read(listed) == b"# hello"
    s3 = [s for s in spans.get_finished_spans() if s.attributes.get("rpc.service") == "S3"]
    names = [s.name for s in s3]
    assert "S3.PutObject" in names and "S3.ListObjectsV2" in names and "S3.GetObject" in names
    for span in s3:
        assert span.kind.name == "CLIENT"
        assert span.attributes["aws.s3.bucket"] == bucket
        assert span.attributes["http.status_code"] == 200
        assert span.attributes["http.url"].startswith(aws_env.endpoint_url)
        assert "?" not in span.attributes["http.url"]  # list-type=2&prefix=... stays out
    # A failing call is a span too, with its status code and an error status.
    with pytest.raises(ObjectGone):
        source.read(replace(listed, key="missing.md"))
    failed = [s for s in spans.get_finished_spans() if s.attributes.get("http.status_code", 0) >= 400]
    assert failed and failed[-1].status.status_code.name == "ERROR"


def test_model_endpoint_attempts_are_client_spans_without_the_key(spans) -> None:
    key = "sk-planted-tracing-key-0a1b2c3d"
    with FaultServer() as server:
        server.push(status(503), ok("the answer [1]"))
        backoff = Backoff(base_s=0.01, factor=2.0, max_delay_s=0.1, max_attempts=3, jitter="full", max_total_s=5.0)
        endpoint = ChatEndpoint(server.base_url + "?api-version=1", api_key=key, backoff=backoff, rng=random.Random(1))
        assert endpoint.answer("q?", ["p"]) == "the answer [1]"
        endpoint.close()
    posts = [s for s in spans.get_finished_spans() if s.name == "POST"]
    assert [s.attributes["http.status_code"] for s in posts] == [503, 200]
    assert all(s.kind.name == "CLIENT" and "?" not in s.attributes["http.url"] for s in posts)
    assert all(key not in str(dict(s.attributes)) for s in posts)


def test_an_unreachable_collector_neither_crashes_nor_blocks(tmp_path) -> None:
    script = textwrap.dedent(
        """
        import time
        from runtime_ops.observability import tracing
        started = time.monotonic()
        for i in range(50):
            with tracing.tracer().start_as_current_span(f"span {i}"):
                pass
        print(f"spans {time.monotonic() - started:.3f}")
        """
    )
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": dead, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.split()[-1]) < 1.0  # spans cost nothing while the exporter fails
    # Exit flushes with the short default export timeout (2 s; OpenTelemetry's own 10 s takes ~8 s here).
    assert elapsed < 6.5, elapsed
