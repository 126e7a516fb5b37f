"""URLs fit for messages, logs and identities: what an error may say about an endpoint."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["endpoint_url", "public_url"]


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


def endpoint_url(url: str, suffix: str, what: str) -> str:
    """The URL of an OpenAI-compatible route (`suffix`, e.g. "/embeddings") from a base (`http://host/v1`) or the
    full route's URL; `what` names the endpoint in the error for anything but an http(s) URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{what} must be an http(s) URL, got {public_url(url)!r}")
    path = parts.path.rstrip("/")
    if not path.endswith(suffix):
        path += suffix
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
