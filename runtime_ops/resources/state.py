"""Dagster resources over runtime_ops' own state and settings: the only way assets reach them."""

import dagster as dg

from runtime_ops.store import StateStore, open_store


class StateStoreResource(dg.ConfigurableResource):
    """The state store: SQLite file by default, PostgreSQL when RUNTIME_OPS_DATABASE_URL says so."""

    database_url: str

    def store(self) -> StateStore:
        return open_store(self.database_url)


class GatePolicyResource(dg.ConfigurableResource):
    """How the promotion gate judges a candidate, and the golden set it is judged on."""

    primary_metric: str = "ndcg@5"
    auto_approve_margin: float = 0.02
    max_regression: float = 0.05
    golden_set: str

    def policy(self):  # type: ignore[no-untyped-def]
        from runtime_ops.models.policy import GatePolicy

        return GatePolicy(
            primary_metric=self.primary_metric,
            auto_approve_margin=self.auto_approve_margin,
            max_regression=self.max_regression,
        )


class ApprovalsResource(dg.ConfigurableResource):
    """Who approves, how long a request may wait, and where it is announced (Slack or the log).

    Secrets (the Slack token, the link-signing secret) are read from the settings at run time, never stored in
    resource config, so they do not show in the Dagster UI.
    """

    approvers: list[str] = []
    escalation_approvers: list[str] = []
    required_approvals: int = 1
    escalate_after_seconds: float | None = 4 * 3600
    expire_after_seconds: float | None = 24 * 3600
    public_url: str = "http://127.0.0.1:8000"
    dagster_url: str = "http://127.0.0.1:3000"
    slack_channel: str | None = None
    slack_api_url: str | None = None

    def request_policy(self):  # type: ignore[no-untyped-def]
        from datetime import timedelta

        from runtime_ops.decisions.rules import RequestPolicy

        return RequestPolicy(
            approvers=tuple(self.approvers),
            escalation_approvers=tuple(self.escalation_approvers),
            required_approvals=self.required_approvals,
            escalate_after=timedelta(seconds=self.escalate_after_seconds) if self.escalate_after_seconds else None,
            expire_after=timedelta(seconds=self.expire_after_seconds) if self.expire_after_seconds else None,
        )

    def announcer(self, store: StateStore):  # type: ignore[no-untyped-def]
        from runtime_ops.approvals.announce import Announcer
        from runtime_ops.approvals.slack.client import SlackNotifier, slack_client
        from runtime_ops.settings import get_settings

        settings = get_settings()
        notifier = None
        if settings.slack_bot_token and self.slack_channel:
            client = slack_client(settings.slack_bot_token.get_secret_value(), self.slack_api_url)
            notifier = SlackNotifier(client, self.slack_channel)
        return Announcer(
            store=store,
            link_secret=settings.resolved_link_secret(),
            public_url=self.public_url,
            dagster_url=self.dagster_url,
            notifier=notifier,
        )


class LocksResource(dg.ConfigurableResource):
    """Distributed locks: Redis when REDIS_URL is set, else leases on the state store (same semantics)."""

    redis_url: str | None = None
    database_url: str

    def locker(self):  # type: ignore[no-untyped-def]
        from runtime_ops.locks.factory import locker_for

        return locker_for(self.redis_url, self.database_url)
