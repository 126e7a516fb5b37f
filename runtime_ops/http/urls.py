"""URLs fit for messages, logs and identities: what an error may say about an endpoint."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["public_url"]


def public_url(url: str) -> str:
    """`url` fit for messages and logs: no user:password, query string or fragment."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
