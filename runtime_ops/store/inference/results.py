"""Inference results, per pipeline: what the model answered for an item, keyed by (item, input digest, model).

`record` inserts once (a second writer of the same key, e.g. two overlapping runs, keeps the first row and is told
so); `found` reads the stored results of a batch of keys in one statement per page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, or_, select

from runtime_ops.store import schema as t
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.scope import Repository, row_dict

_R = t.inference_results
MAX_OUTPUT_CHARS = 2000
_PAGE = 200  # keys per read: a bounded OR of (item, digest) pairs


class InferenceResults(Repository):
    def record(self, row: dict[str, Any]) -> bool:
        """Store one item's result (`item_id`, `input_digest`, `model`, `output`, `label`, `prompt_tokens`,
        `completion_tokens`, `cost_usd`, `run_id`); False when that key already had one (the first is kept)."""
        pipeline = self.owner("record an inference result")
        values = {**row, "output": str(row["output"])[:MAX_OUTPUT_CHARS], "pipeline": pipeline, "created_at": utcnow()}
        with self.tx() as conn:
            return bool(conn.execute(upsert(_R, conn).on_conflict_do_nothing().values(**values)).rowcount)

    def found(self, model: str, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """The stored results of `model` for (item id, input digest) keys, by key (absent: none stored)."""
        pending: Sequence[tuple[str, str]] = list(dict.fromkeys(keys))
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for start in range(0, len(pending), _PAGE):
            page = pending[start : start + _PAGE]
            match = or_(*(and_(_R.c.item_id == item, _R.c.input_digest == digest) for item, digest in page))
            query = select(_R).where(self.owned(_R), _R.c.model == model, match)
            for row in self.fetch(query):
                found = row_dict(row)
                assert found is not None
                out[(found["item_id"], found["input_digest"])] = found
        return out

    def count(self) -> int:
        from sqlalchemy import func

        return int(self.fetch(select(func.count()).select_from(_R).where(self.owned(_R)))[0][0])
