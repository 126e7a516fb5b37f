"""The document steps' work: parse each landed object of a batch once per version, quarantine the unreadable,
chunk the rest (the bodies of `raw_documents` and `document_chunks`, defined in `documents/assets.py`)."""

import time
from collections import Counter

import dagster as dg

from runtime_ops.documents.chunk_profiles import chunker, profiles_in_use
from runtime_ops.documents.parsing import QuarantineError, parse_document
from runtime_ops.faults import failpoint
from runtime_ops.landing import LandingSource, ObjectChanged, ObjectGone, ObjectRef, UnsafePath
from runtime_ops.markdown import code_span, escape_text, table_row
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.progress import Every
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.documents import Documents
from runtime_ops.store.corpus.ledger import Ledger
from runtime_ops.timeouts import Deadline, DeadlineExceeded, deadline

# A progress line per interval, not per N documents: each one is an event-log write (see runtime_ops.progress).
_PROGRESS_SECONDS = 10.0


def _quarantine_table(rows: list[tuple[str, str, str]]) -> str:
    if not rows:
        return "No document was quarantined."
    lines = ["| key | code | reason |", "|---|---|---|"]
    lines += [table_row([code_span(k), escape_text(c), escape_text(r)]) for k, c, r in rows[:200]]
    if len(rows) > 200:
        lines.append(f"| … | | {len(rows) - 200} more |")
    return "\n".join(lines)


def parse_batch(
    context: dg.AssetExecutionContext,
    documents: Documents,
    ledger: Ledger,
    source: LandingSource,
    max_document_bytes: int,
    parse_timeout_s: float | None = None,
) -> dg.MaterializeResult:
    batch_id = context.partition_key
    batch = ledger.get_batch(batch_id)
    if batch is None:
        raise dg.Failure(f"landing batch {batch_id!r} is not in the state store; was the database reset?")
    docs = documents.batch_documents(batch_id)
    todo = [d for d in docs if d["status"] == "pending"]
    context.log.info(f"batch {batch_id}: {len(docs)} objects, {len(todo)} to parse (the rest done earlier)")
    started = time.monotonic()
    progress = Every(_PROGRESS_SECONDS)
    quarantined: list[tuple[str, str, str]] = []
    for i, doc in enumerate(todo, 1):
        ref = ObjectRef(key=doc["key"], version=doc["version"], size=doc["size"], last_modified=doc["last_modified"])
        failpoint("documents.parse")  # before each document: a fault test widens an ingest run here
        bound: Deadline | None = None
        try:
            data = source.read(ref)
            with deadline(parse_timeout_s, f"parsing {doc['key']}") as bound:
                parsed = parse_document(doc["key"], data, max_bytes=max_document_bytes)
        except DeadlineExceeded as exc:
            if exc.deadline is not bound:
                raise  # the step's own timeout: the step fails and retries, the document is not to blame
            reason = f"{exc} (timeouts.parse_document / RUNTIME_OPS_PARSE_TIMEOUT)"
            documents.quarantine(doc["id"], "too_slow", reason)
            quarantined.append((doc["key"], "too_slow", reason))
            context.log.warning(f"quarantined {doc['key']} (too_slow): {reason}")
            continue
        except QuarantineError as exc:
            documents.quarantine(doc["id"], exc.code, exc.reason)
            quarantined.append((doc["key"], exc.code, exc.reason))
            context.log.warning(f"quarantined {doc['key']} ({exc.code}): {exc.reason}")
            continue
        except ObjectChanged as exc:
            documents.quarantine(
                doc["id"],
                "changed",
                f"replaced before it was read ({exc}); the new version lands in its own batch",
            )
            quarantined.append((doc["key"], "changed", str(exc)))
            continue
        except ObjectGone as exc:
            documents.quarantine(doc["id"], "gone", f"deleted before it was read: {exc}")
            quarantined.append((doc["key"], "gone", str(exc)))
            continue
        except UnsafePath as exc:  # a link or special file swapped in since it was listed: nothing was read
            documents.quarantine(doc["id"], "unsafe_path", str(exc))
            quarantined.append((doc["key"], "unsafe_path", str(exc)))
            context.log.warning(f"quarantined {doc['key']} (unsafe_path): {exc}")
            continue
        documents.store_parsed(
            doc["id"],
            content_hash=parsed.content_hash,
            fmt=parsed.format,
            title=parsed.title,
            text=parsed.text,
        )
        if progress.due():
            context.log.info(f"parsed {i}/{len(todo)} documents of batch {batch_id}")
    statuses = Counter(d["status"] for d in documents.batch_documents(batch_id))
    return dg.MaterializeResult(
        metadata={
            "batch_id": batch_id,
            "objects": dg.MetadataValue.int(len(docs)),
            "parsed": dg.MetadataValue.int(statuses.get("parsed", 0) + statuses.get("ok", 0)),
            "duplicates": dg.MetadataValue.int(statuses.get("duplicate", 0)),
            "quarantined": dg.MetadataValue.int(statuses.get("quarantined", 0)),
            "quarantine": dg.MetadataValue.md(_quarantine_table(quarantined)),
            "duration_s": dg.MetadataValue.float(round(time.monotonic() - started, 3)),
        }
    )


def chunk_batch(context: dg.AssetExecutionContext, store: StateStore, spec: PipelineSpec) -> dg.MaterializeResult:
    """Cut the batch's parsed documents for every chunking profile in use: the declared one (what the next
    candidate reads) and production's, the candidate's and rollback targets' where they cut differently."""
    batch_id = context.partition_key
    docs = store.documents.parsed_documents(batch_id)
    profiles = profiles_in_use(store, spec)
    cutters = {pid: chunker(profile) for pid, profile in profiles.items()}
    declared = next(iter(profiles))
    counts = dict.fromkeys(profiles, 0)
    stale = 0
    progress = Every(_PROGRESS_SECONDS)
    for i, doc in enumerate(docs, 1):
        pieces = {pid: cut(doc["text"] or "") for pid, cut in cutters.items()}
        if store.documents.store_chunks(doc["id"], pieces) == "superseded":
            stale += 1
        for pid, texts in pieces.items():
            counts[pid] += len(texts)
        if progress.due():
            context.log.info(f"chunked {i}/{len(docs)} documents of batch {batch_id}")
    store.ledger.mark_batch(batch_id, "ingested", run_id=context.run_id)
    return dg.MaterializeResult(
        metadata={
            "batch_id": batch_id,
            "documents": dg.MetadataValue.int(len(docs)),
            "chunks": dg.MetadataValue.int(counts[declared]),
            "chunking": profiles[declared].describe(),
            "chunks_by_profile": dg.MetadataValue.md(
                "\n".join(f"- {profiles[pid].describe()}: {n} chunks" for pid, n in counts.items())
            ),
            "superseded_on_arrival": dg.MetadataValue.int(stale),
            "corpus_revision": dg.MetadataValue.int(store.ledger.corpus_revision()),
        }
    )
