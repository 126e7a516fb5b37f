"""The landing resource: opens a pipeline's landing (a local folder or an S3 prefix) behind one interface."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from runtime_ops.landing import LandingSource, open_landing
from runtime_ops.landing.queue import EventQueue

if TYPE_CHECKING:
    from runtime_ops.pipeline.spec import LandingSpec


class LandingResource(dg.ConfigurableResource):
    """Process-wide: how S3 is reached (`AWS_ENDPOINT_URL`, through dagster-aws' S3Resource). Each pipeline's
    landing (`landing.uri`, `landing.sqs_queue_url` in its defs.yaml) is passed in by that pipeline's code."""

    endpoint_url: str | None = None

    def source(self, landing: LandingSpec) -> LandingSource:
        return open_landing(landing.uri, endpoint_url=self.endpoint_url)

    def event_queue(self, landing: LandingSpec) -> EventQueue | None:
        """The SQS queue of event mode (the client is built on first use), or None in listing mode."""
        if not landing.sqs_queue_url:
            return None
        return EventQueue(landing.sqs_queue_url, endpoint_url=self.endpoint_url)
