"""Labelling a batch of tickets: each ticket's stored result is reused, the others are sent to the model under a
concurrency cap, and each answer is stored the moment it arrives, before it counts.

So a run killed at any point leaves every answer it received in the state store, and its retry calls the model only
for the tickets without one. The key is (pipeline, ticket id, input digest, model): a changed ticket text, prompt or
model is a new key, labelled again; an unchanged one is never paid for twice.

When a call fails for good (the endpoint gave up after its retries, or refused), the calls not yet started are
cancelled, those in flight finish and are stored, and `LabellingFailed` says how many tickets are labelled and how
many remain: a retry of the run labels the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

from runtime_ops.faults import failpoint
from runtime_ops.inference.completion import Classifier, Completion, LabelledItem, Labelling
from runtime_ops.inference.costs import Prices, Usage
from runtime_ops.inference.labels import parse_label
from runtime_ops.inference.prompts import build_request, request_digest
from runtime_ops.inference.tickets import Ticket
from runtime_ops.store.inference.results import InferenceResults

log = logging.getLogger(__name__)


class LabellingFailed(RuntimeError):
    """A ticket could not be labelled; the answers received before are stored (a retry labels only the rest)."""


def label_tickets(
    tickets: Sequence[Ticket],
    *,
    labels: Sequence[str],
    classifier: Classifier,
    prices: Prices,
    results: InferenceResults,
    concurrency: int,
    run_id: str | None = None,
    on_stored: Callable[[int, int], None] | None = None,
) -> Labelling:
    """Label `tickets` with `classifier` (see the module docstring). `on_stored(done, todo)` follows progress."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    requests = {t.id: build_request(t.text, labels) for t in tickets}
    digests = {item: request_digest(request) for item, request in requests.items()}
    stored = results.found(classifier.model, digests.items())
    todo = [t for t in tickets if (t.id, digests[t.id]) not in stored]
    called: set[str] = set()
    unreported = 0
    if todo:
        log.info("labelling %d tickets with %s (%d reused)", len(todo), classifier.model, len(tickets) - len(todo))
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="inference") as pool:
            futures: dict[Future[Completion], Ticket] = {
                pool.submit(classifier.complete, requests[t.id], item_id=t.id): t for t in todo
            }
            failure: BaseException | None = None
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    if future.cancelled():
                        continue
                    error = future.exception()
                    if error is not None:
                        if failure is None:  # stop starting calls; those in flight still land and are stored
                            failure = error
                            for other in pending:
                                other.cancel()
                        continue
                    ticket = futures[future]
                    completion = future.result()
                    unreported += not completion.usage_reported
                    _store(results, classifier.model, ticket, digests[ticket.id], completion, labels, prices, run_id)
                    called.add(ticket.id)
                    failpoint("inference.result_stored")
                    if on_stored is not None:
                        on_stored(len(called), len(todo))
            if failure is not None:
                remaining = len(todo) - len(called)
                raise LabellingFailed(
                    f"{remaining} of {len(tickets)} tickets are not labelled ({len(tickets) - remaining} are, and "
                    f"stored): {failure}; retry the run to label the rest (only they are sent to the model)"
                ) from failure
    # Read back what the store holds: a result another run stored first for the same key is the one that counts.
    stored = results.found(classifier.model, digests.items())
    items = [_item(stored[(t.id, digests[t.id])], reused=t.id not in called) for t in tickets]
    return Labelling(items, classifier.model, unreported)


def _store(
    results: InferenceResults,
    model: str,
    ticket: Ticket,
    digest: str,
    completion: Completion,
    labels: Sequence[str],
    prices: Prices,
    run_id: str | None,
) -> None:
    results.record(
        {
            "item_id": ticket.id,
            "input_digest": digest,
            "model": model,
            "output": completion.text,
            "label": parse_label(completion.text, labels),
            "prompt_tokens": completion.usage.prompt_tokens,
            "completion_tokens": completion.usage.completion_tokens,
            "cost_usd": prices.cost(completion.usage),
            "run_id": run_id,
        }
    )


def _item(row: dict[str, Any], *, reused: bool) -> LabelledItem:
    usage = Usage(int(row["prompt_tokens"]), int(row["completion_tokens"]))
    return LabelledItem(row["item_id"], row["input_digest"], row["label"], usage, float(row["cost_usd"]), reused)
