"""Field types and checks shared by the sections of a pipeline's defs.yaml: a secret by reference (`{env: VAR}`),
a fraction, an http(s) URL."""

from __future__ import annotations

from typing import Annotated

import dagster as dg
from pydantic import Field

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class EnvRef(dg.Resolvable, dg.Model):
    """A reference to an environment variable, read when the value is needed (never stored by Dagster)."""

    env: str = Field(description="Name of the environment variable holding the secret.", pattern=r"^[A-Z_][A-Z0-9_]*$")


def secret_ref(value: object) -> object:
    # A plain string in a secret field is a literal secret: refuse it before it reaches any config or log.
    if isinstance(value, str):
        raise ValueError("a literal secret is not allowed here; reference an environment variable: {env: VAR_NAME}")
    return value


def http_url(value: str | None) -> str | None:
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value or None
