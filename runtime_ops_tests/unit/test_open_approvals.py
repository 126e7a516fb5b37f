"""A pipeline with no approvers is refused once others can reach its approval pages (Slack, a public URL); a loopback
URL (the default, or `runtime-ops dev` on another port) is this machine only, where the CLI's operator decides."""

from __future__ import annotations

import pytest

from runtime_ops.pipeline.approval_attributes import ApprovalAttributes
from runtime_ops.pipeline.resolve import OpenApprovals, check_approvers
from runtime_ops.settings import Settings


def _settings(url: str) -> Settings:
    settings = Settings.model_validate({"RUNTIME_OPS_PUBLIC_URL": url})  # as the environment sets it
    assert "public_url" in settings.model_fields_set and settings.public_url == url
    return settings


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8391", "http://localhost:9000", "http://[::1]:8000", "http://127.0.0.2"]
)
def test_a_loopback_public_url_keeps_the_open_local_default(url: str) -> None:
    check_approvers(ApprovalAttributes(), _settings(url), owner="pipeline 'demo'")


@pytest.mark.parametrize("url", ["https://ops.example.com", "http://10.0.0.5:8000", "http://0.0.0.0:8000"])
def test_a_reachable_public_url_needs_approvers(url: str) -> None:
    with pytest.raises(OpenApprovals, match=r"names no approvers while a public URL \(RUNTIME_OPS_PUBLIC_URL="):
        check_approvers(ApprovalAttributes(), _settings(url), owner="pipeline 'demo'")
    check_approvers(ApprovalAttributes(approvers=["U1"]), _settings(url), owner="pipeline 'demo'")


def test_the_dev_console_links_use_its_own_ports_and_stay_local() -> None:
    from runtime_ops.cli.dev import link_urls

    urls = link_urls("0.0.0.0", 8391, "127.0.0.1", 3111)
    assert urls == {
        "RUNTIME_OPS_PUBLIC_URL": "http://127.0.0.1:8391",
        "RUNTIME_OPS_DAGSTER_URL": "http://127.0.0.1:3111",
    }
    check_approvers(ApprovalAttributes(), _settings(urls["RUNTIME_OPS_PUBLIC_URL"]), owner="pipeline 'demo'")
