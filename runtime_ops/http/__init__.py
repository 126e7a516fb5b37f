"""Outbound HTTP: a pure retry policy (`retry`) and the retry loop around one request (`client`)."""

from runtime_ops.http.client import EndpointError, call_with_retries
from runtime_ops.http.retry import Backoff, InvalidResponse, classify, parse_retry_after
from runtime_ops.http.urls import public_url

__all__ = [
    "Backoff",
    "EndpointError",
    "InvalidResponse",
    "call_with_retries",
    "classify",
    "parse_retry_after",
    "public_url",
]
