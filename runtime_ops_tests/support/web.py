"""httpx's one-call functions (get, post, ...) for the tests' calls to their local servers, sharing one TLS context.

Each of httpx's module functions builds a client, and that client a TLS context that parses the whole CA bundle:
about 27 ms of CPU per call, even for a plain http:// URL. Tests that poll a health route or send hundreds of
queries spent a third of their time there. These functions behave as httpx's (a fresh client per call, so no
cookie or connection is carried from one call to the next) but hand every client the same context.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx

__all__ = ["delete", "get", "post", "put", "request"]

_TLS = ssl.create_default_context()


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, url, verify=_TLS, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, verify=_TLS, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.post(url, verify=_TLS, **kwargs)


def put(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.put(url, verify=_TLS, **kwargs)


def delete(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.delete(url, verify=_TLS, **kwargs)
