"""Where documents arrive: one ``LandingSource`` interface over a local folder and an S3 prefix.

- ``base``: the interface (``LandingSource``, ``ObjectRef``), the key rules and the errors;
- ``local`` / ``s3``: the two sources; ``confined``: how the local one never leaves its folder (no link followed);
- ``open``: ``open_landing(uri)`` picks a source from ``RUNTIME_OPS_LANDING``;
- ``queue``: the SQS queue S3 event notifications arrive on (event mode of the landing sensor).

The Dagster resource that hands a source to assets and sensors is ``runtime_ops.resources.landing``.
Importing this package costs no boto3 or Dagster import: clients are built on first use.
"""

from runtime_ops.landing.base import (
    IGNORED_SUFFIXES,
    LandingBucketMissing,
    LandingError,
    LandingSource,
    ObjectChanged,
    ObjectGone,
    ObjectRef,
    UnsafePath,
    is_ignored_key,
)
from runtime_ops.landing.local import LocalLandingSource
from runtime_ops.landing.open import open_landing
from runtime_ops.landing.s3 import S3LandingSource

__all__ = [
    "IGNORED_SUFFIXES",
    "LandingBucketMissing",
    "LandingError",
    "LandingSource",
    "LocalLandingSource",
    "ObjectChanged",
    "ObjectGone",
    "ObjectRef",
    "S3LandingSource",
    "UnsafePath",
    "is_ignored_key",
    "open_landing",
]
