"""Resource config values from the settings, safe to show: a value that comes from an environment variable (a URL
may carry a password) is handed to Dagster as that variable's name (`dg.EnvVar`, read when the resource is used),
so the UI and the repository snapshot never hold it."""

from __future__ import annotations

import os
from typing import overload

import dagster as dg


@overload
def configured_url(value: str | None, variable: str, default: str) -> str | dg.EnvVar: ...
@overload
def configured_url(value: str | None, variable: str, default: None = None) -> str | dg.EnvVar | None: ...
def configured_url(value: str | None, variable: str, default: str | None = None) -> str | dg.EnvVar | None:
    if not value:
        return default
    return dg.EnvVar(variable) if os.environ.get(variable, "").strip() else value
