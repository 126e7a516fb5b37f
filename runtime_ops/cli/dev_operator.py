"""The local operator of `runtime-ops dev`: an operator key (decide scope, approver `local`, the approver the
console's signed links name) made at start and kept in RUNTIME_OPS_HOME, with which the CLI decides when no other
key is given. So the "Decide with" command a pending check prints on `make dev` works as printed.

Only `runtime-ops dev` writes the file; anywhere else the CLI needs RUNTIME_OPS_OPERATOR_KEY or --key-file. The
file is as private as the state store beside it (mode 0600) and holds the only copy of the key (the store keeps its
hash); `runtime-ops keys revoke` ends it, and the next `runtime-ops dev` makes a new one.
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime_ops.approvals.links import LOCAL_APPROVER
from runtime_ops.command_hint import command
from runtime_ops.errors import UserError
from runtime_ops.settings import Settings
from runtime_ops.store.operations.api_keys import ApiKeys

KEY_FILE = "operator_key"
KEY_NAME = "local-operator"


def key_file(settings: Settings) -> Path:
    return settings.resolved_home / KEY_FILE


def operator_key(settings: Settings) -> str | None:
    """The CLI operator's key: RUNTIME_OPS_OPERATOR_KEY, else the local operator's (None: neither)."""
    if settings.operator_key:
        return settings.operator_key.get_secret_value()
    path = key_file(settings)
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UserError(
            f"cannot read the local operator key {path}: {why}; delete it (the next `runtime-ops dev` writes a new "
            "one) or set RUNTIME_OPS_OPERATOR_KEY"
        ) from None


def ensure_local_operator(keys: ApiKeys, settings: Settings) -> str | None:
    """Make the local operator's key unless a usable one is kept, or the environment names an operator key of its
    own. Returns what to tell the person at the console (None: nothing changed)."""
    if settings.operator_key:
        return None
    path = key_file(settings)
    kept = operator_key(settings)
    found = keys.verify(kept) if kept else None
    if found is not None and found.allows("decide") and found.approver == LOCAL_APPROVER:
        return None
    new = keys.create(KEY_NAME, ["decide"], created_by="runtime-ops dev", approver=LOCAL_APPROVER)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written beside, then moved over: a reader sees the old key or the new one, never a part of either.
    partial = path.with_name(f".{KEY_FILE}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(new.key + "\n")
    os.replace(partial, path)
    return (
        f"the local operator's key ({new.info.key_id}, deciding as {LOCAL_APPROVER}) is in {path}: "
        f"`{command('approvals approve ID')}` on this machine decides with it"
    )
