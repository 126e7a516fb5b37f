"""``open_landing``: the landing source a ``RUNTIME_OPS_LANDING`` value names."""

from __future__ import annotations

import os

from runtime_ops.landing.base import SETTING, LandingSource
from runtime_ops.landing.local import LocalLandingSource
from runtime_ops.landing.s3 import S3LandingSource


def open_landing(uri: str, *, endpoint_url: str | None = None) -> LandingSource:
    """``s3://bucket[/prefix]`` → :class:`S3LandingSource`; a path → :class:`LocalLandingSource`."""
    uri = os.fspath(uri)
    if not uri or not str(uri).strip():
        raise ValueError(f"{SETTING} is empty: use s3://bucket[/prefix] or a local folder path")
    if uri.startswith("s3://"):
        return S3LandingSource(uri, endpoint_url=endpoint_url)
    if "://" in uri:
        raise ValueError(f"{SETTING}={uri!r}: unsupported scheme; use s3://bucket[/prefix] or a local folder path")
    return LocalLandingSource(uri)
