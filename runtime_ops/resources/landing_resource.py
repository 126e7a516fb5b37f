"""The landing resource: where documents arrive, a local folder or an S3 prefix, behind one interface."""

from typing import TYPE_CHECKING

import dagster as dg

from runtime_ops.documents.landing import LandingSource, open_landing

if TYPE_CHECKING:
    from runtime_ops.documents.landing.queue import EventQueue


class LandingResource(dg.ConfigurableResource):
    """`uri` is `s3://bucket/prefix` (through dagster-aws' S3Resource) or a local folder path.

    With `sqs_queue_url` (RUNTIME_OPS_SQS_QUEUE_URL) the landing sensor runs in event mode: it reads the S3
    event notifications of the bucket from that queue instead of listing the prefix.
    """

    uri: str
    endpoint_url: str | None = None
    sqs_queue_url: str | None = None
    batch_max_objects: int = 1000
    scan_max_keys: int = 100_000
    max_document_bytes: int = 10 * 1024 * 1024

    def source(self) -> LandingSource:
        return open_landing(self.uri, endpoint_url=self.endpoint_url)

    def event_queue(self) -> "EventQueue | None":
        """The SQS queue of event mode (the client is built on first use), or None in listing mode."""
        if not self.sqs_queue_url:
            return None
        from runtime_ops.documents.landing.queue import EventQueue

        return EventQueue(self.sqs_queue_url, endpoint_url=self.endpoint_url)
