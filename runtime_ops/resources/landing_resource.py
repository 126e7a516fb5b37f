"""The landing resource: where documents arrive, a local folder or an S3 prefix, behind one interface."""

import dagster as dg

from runtime_ops.resources.landing import LandingSource, open_landing


class LandingResource(dg.ConfigurableResource):
    """`uri` is `s3://bucket/prefix` (through dagster-aws' S3Resource) or a local folder path."""

    uri: str
    endpoint_url: str | None = None
    batch_max_objects: int = 1000
    scan_max_keys: int = 100_000
    max_document_bytes: int = 10 * 1024 * 1024

    def source(self) -> LandingSource:
        return open_landing(self.uri, endpoint_url=self.endpoint_url)
