"""Operators: who the CLI and the JSON API decide as.

An operator authenticates with an API key that has the `decide` scope and is mapped to an approver id
(`runtime-ops keys create alice --scope decide --approver U024BE7LH`); the decision's actor is that approver id,
never a name the caller types. `--as` may only repeat it. Only the key's hash is stored (see
`store.operations.api_keys`).
"""

from __future__ import annotations

from datetime import datetime

from runtime_ops.command_hint import command
from runtime_ops.store import ApiKey
from runtime_ops.store.operations.api_keys import ApiKeys


def create_hint() -> str:
    return command("keys create <name> --scope decide --approver <your approver id>")


class OperatorRefused(Exception):
    """No usable operator credential; the message names what is wrong and how to fix it."""

    def __init__(self, message: str, key_id: str | None = None) -> None:
        super().__init__(message)
        self.key_id = key_id


def operator(keys: ApiKeys, key: str | None, *, claimed: str | None = None, now: datetime | None = None) -> ApiKey:
    """The live key `key`, if it may decide (decide scope, an approver id) as `claimed` (when given)."""
    if not key or not key.strip():
        raise OperatorRefused(
            "no operator credential: set RUNTIME_OPS_OPERATOR_KEY (or --key-file) to your operator key, made with "
            f"`{create_hint()}`; --as alone does not say who you are"
        )
    found = keys.verify(key.strip(), now=now)
    if found is None:
        raise OperatorRefused("unknown or revoked operator key (RUNTIME_OPS_OPERATOR_KEY)")
    if not found.allows("decide"):
        raise OperatorRefused(
            f"API key {found.key_id} lacks the decide scope (it has: {', '.join(found.scopes)}); {create_hint()}",
            found.key_id,
        )
    if not found.approver:
        raise OperatorRefused(
            f"API key {found.key_id} is not mapped to an approver id, so it cannot decide; {create_hint()}",
            found.key_id,
        )
    if claimed and claimed != found.approver:
        raise OperatorRefused(
            f"--as {claimed} but API key {found.key_id} decides as {found.approver}: the key says who decides",
            found.key_id,
        )
    return found
