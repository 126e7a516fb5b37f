"""The approvals resource: where approval requests are announced and which URLs their links use."""

from __future__ import annotations

import dagster as dg


class ApprovalsResource(dg.ConfigurableResource):
    """Where approval requests are announced (Slack or the log) and which URLs their links use.

    Secrets (the Slack token, the link-signing secret) are read from the settings at run time, never stored in
    resource config, so they do not show in the Dagster UI. Who approves is each pipeline's own policy;
    `runtime_ops.approvals.announce.announcer_for` builds the announcer from this resource.
    """

    public_url: str = "http://127.0.0.1:8000"
    dagster_url: str = "http://127.0.0.1:3000"
    slack_api_url: str | None = None
