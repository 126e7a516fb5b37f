"""How many cores this process may embed with: all it is allowed to run on, or fewer inside `limited_cores`.

A backfill spreads a re-embedding over runs (processes, containers, Kubernetes Job pods), each sized for a share of
the machine: a partition run that also forked a worker per core, or let torch or BLAS start a thread per core, would
fight the other partition runs for the same cores, and adding runs would add nothing. Inside `limited_cores(n)`
the forked embedding pool, BLAS/OpenMP thread pools and torch's intra-op threads use at most `n`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_LIMIT: list[int] = []  # the innermost limit in force (a stack: limits nest)


def available_cores() -> int:
    """The cores this process may use: its CPU affinity, within any `limited_cores` in force."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min([cores, *_LIMIT]))


@contextmanager
def limited_cores(n: int) -> Iterator[None]:
    """Embed with at most `n` cores in this process for the duration of the block."""
    from threadpoolctl import threadpool_limits

    if n < 1:
        raise ValueError(f"a process embeds with at least 1 core, got {n}")
    torch = sys.modules.get("torch")  # only when already loaded: importing it here would cost seconds
    torch_before = torch.get_num_threads() if torch is not None else None
    _LIMIT.append(n)
    try:
        with threadpool_limits(limits=n):
            if torch is not None:
                torch.set_num_threads(min(n, torch_before or n))
            yield
    finally:
        _LIMIT.pop()
        if torch is not None and torch_before is not None:
            torch.set_num_threads(torch_before)
