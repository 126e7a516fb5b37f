"""How messages spell the `runtime-ops` command, so that a hint runs as printed.

After `make dev` the command is in the checkout's `.venv/bin/`, which is not on PATH: a message that says a bare
`runtime-ops keys create ...` sends a newcomer to "command not found" (or, in a `$(...)`, to an empty key and a
misleading 401). Where the command is on PATH (an image, an activated venv) it is spelled bare.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

NAME = "runtime-ops"


def cli() -> str:
    """`runtime-ops` when PATH finds this interpreter's command; else its path, relative to the working folder
    when it lies inside it (`.venv/bin/runtime-ops` in a checkout)."""
    script = Path(sys.prefix) / "bin" / NAME
    found = shutil.which(NAME)
    if found is not None and (not script.exists() or Path(found).resolve() == script.resolve()):
        return NAME
    if not script.exists():
        return NAME
    try:
        return str(script.relative_to(Path(os.getcwd())))
    except ValueError:
        return str(script)


def command(args: str) -> str:
    """`<cli> <args>`: a whole command line for a message, e.g. `command("keys list")`."""
    return f"{cli()} {args}"
