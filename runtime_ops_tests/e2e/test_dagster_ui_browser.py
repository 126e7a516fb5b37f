"""The Dagster UI tells the truth about a candidate waiting for a person, seen in a real browser (Debian's Chromium
driven by Playwright) against the topology's webserver, daemon and code server on PostgreSQL.

While the candidate waits: the run list shows no failed run, the catalog no failed asset, and the human_approval
check says *Pending* with the approval request's id. After the approval (the CLI, as an operator decides), the
daemon's approvals sensor promotes it, automation re-evaluates production, and every asset of the pipeline shows
materialized, none failed. With RUNTIME_OPS_UPDATE_DOCS=1 the test also refreshes the README's screenshots.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from playwright.sync_api import BrowserContext, Page

from runtime_ops_tests.support.approvals_support import operator_cli
from runtime_ops_tests.support.chromium import chromium
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, pending_candidate
from runtime_ops_tests.support.topology import wait_for

pytestmark = pytest.mark.slow(seconds=68)  # alone on 2 cores (Dec 2026): started first, see conftest.py

DOCS = Path(__file__).resolve().parents[2] / "docs"
UPDATE_DOCS = os.environ.get("RUNTIME_OPS_UPDATE_DOCS") == "1"
ASSETS = (
    "raw_documents",
    "document_chunks",
    "embedding_model",
    "golden_questions",
    "evaluation_report",
    "production_model",
    "document_embeddings",
    "retrieval_index",
    "rag_answers",
    "production_evaluation",
)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    with chromium(tmp_path / "chromium-profile", {"width": 1400, "height": 900}, 30_000) as context:
        yield context


def _open(page: Page, url: str, ready: str) -> str:
    """Load a UI page and wait until `ready` shows; the page's text."""
    page.goto(url)
    page.get_by_text(ready, exact=False).first.wait_for()
    page.wait_for_load_state("networkidle")
    return page.inner_text("main") if page.locator("main").count() else page.inner_text("body")


def _shoot(page: Page, name: str) -> None:
    if UPDATE_DOCS:
        page.screenshot(path=str(DOCS / name))


def _catalog_statuses(page: Page, url: str) -> dict[str, str]:
    """Asset name -> the text of its catalog row (description, code location, status), for the pipeline's assets."""
    text = _open(page, f"{url}/assets", "demo / retrieval_index")
    # A partitioned asset's counts load after the rows ("- partitions" until then; late on a loaded machine): the
    # rows are read once every count has arrived.
    deadline = time.monotonic() + 60
    while "- partitions" in text and time.monotonic() < deadline:
        page.wait_for_timeout(500)
        text = page.inner_text("main") if page.locator("main").count() else page.inner_text("body")
    # Each row starts with "demo / <asset>" (twice: the link and its label) and runs to the next row's start.
    parts = re.split(r"(?:^|\n)demo / (\w+)\n(?:demo / \1\n)?", text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_the_ui_shows_a_pending_approval_as_waiting_and_green_after_it(
    env, postgres_url: str, topology, tmp_path: Path, browser: BrowserContext
) -> None:
    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), RUNTIME_OPS_SENSOR_INTERVAL="1", **NEEDS_A_HUMAN)
    topo = topology()
    topo.start_code_server(wait=False)
    store, pending, _ = pending_candidate(landing, topo.instance)
    rid = pending["id"]
    topo.wait_code_server()
    topo.set_sensors(running={"demo__approvals_sensor", "automation_sensor"})
    topo.start_daemon()
    url = topo.start_webserver()
    topo.graphql("mutation { setNuxSeen }")  # the first-visit community dialog would cover the page
    page = browser.new_page()

    # Waiting: no failed run, no failed asset, the check pending with the request id.
    runs = _open(page, f"{url}/runs", "demo__train_job")
    assert "Success" in runs and "Failure" not in runs, runs
    _shoot(page, "dagster-runs-pending.png")
    statuses = _catalog_statuses(page, url)
    assert set(statuses) >= set(ASSETS) - {"production_evaluation"}, statuses
    assert not [a for a, s in statuses.items() if "Fail" in s], statuses
    check = _open(page, f"{url}/assets/demo/evaluation_report?view=checks", "human_approval")
    page.get_by_text("human_approval").first.click()
    page.get_by_text("Latest execution").first.wait_for()
    check = page.inner_text("body")
    assert f"Pending: candidate v2 waits for a human decision: approval request {rid}" in check, check
    assert re.search(r"status\s+pending", check) and re.search(rf"approval_id\s+{rid}", check), check
    _shoot(page, "dagster-check-pending.png")

    # The decision: the approvals sensor promotes, automation evaluates production; every run succeeds.
    assert operator_cli(["approvals", "approve", rid, "--as", "alice"]) == 0
    wait_for(lambda: store.registry.alias("production") == 2, 120, "production on v2")
    key = dg.AssetKey(["demo", "production_evaluation"])
    wait_for(lambda: topo.instance.get_latest_materialization_event(key), 180, "production re-evaluated")
    finished = ("SUCCESS", "FAILURE", "CANCELED")
    wait_for(lambda: all(r.status.value in finished for r in topo.instance.get_runs()), 120, "every run finished")
    assert {r.status.value for r in topo.instance.get_runs()} == {"SUCCESS"}, topo.log_tails()

    runs = _open(page, f"{url}/runs", "demo__promotion_job")
    assert "Failure" not in runs, runs
    statuses = _catalog_statuses(page, url)
    assert set(statuses) >= set(ASSETS), statuses
    for asset in ASSETS:
        text = statuses[asset]
        partitioned = re.search(r"All\s+\S*\s*0", text)  # "All", then the failed and missing partition counts
        assert "Fail" not in text and ("Materialized" in text or partitioned), (asset, text)
    _shoot(page, "dagster-catalog-after-approval.png")
    _open(page, f"{url}/assets/demo/evaluation_report?view=checks", "human_approval")
    page.get_by_text("human_approval").first.click()
    page.get_by_text("Latest execution").first.wait_for()
    check = page.inner_text("body")
    assert "Succeeded" in check and "Pending:" not in check.split("Latest execution", 1)[1][:400], check
