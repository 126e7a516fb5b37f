"""Moved to `runtime_ops.decisions.rules`; this alias exists only for `runtime_ops/store/approvals.py`.

The store is being split into repositories in parallel; once it imports `runtime_ops.decisions.rules`,
delete this module. Nothing else may import it.
"""

from runtime_ops.decisions.rules import RequestPolicy, authorise, tally

__all__ = ["RequestPolicy", "authorise", "tally"]
