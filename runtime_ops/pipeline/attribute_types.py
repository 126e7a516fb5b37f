"""Field types and checks shared by the sections of a pipeline's defs.yaml: a secret by reference (`{env: VAR}`),
a fraction, an http(s) URL."""

from __future__ import annotations

from typing import Annotated

import dagster as dg
from pydantic import Field

# Constraints go inside the type: Dagster's resolution applies a Field's own constraints to `None` as well, so
# `x: int | None = Field(gt=0)` fails on `x: null` with a raw TypeError; `Positive | None` accepts it.
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
Positive = Annotated[int, Field(gt=0)]
EnvName = Annotated[str, Field(pattern=r"^[A-Z_][A-Z0-9_]*$")]


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
