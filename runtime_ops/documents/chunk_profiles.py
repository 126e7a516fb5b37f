"""Which chunking profiles a pipeline keeps chunks for, and cutting current documents for one (glue over the store
and the chunker, no Dagster).

A document is cut once per profile in use: the one the pipeline declares (what its next candidate reads),
production's, the candidate's, and that of every model version whose vector index is kept (a rollback target).
`document_chunks` cuts each new document for all of them; a profile that is new to the corpus (a candidate that
cuts differently) is cut for the whole current corpus by the candidate's training (`ensure_chunks`), and every
reader of a model's chunks calls `ensure_chunks` first, so a document that became current while a profile came
into use is cut when it is first needed, never left out of an index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runtime_ops.documents.chunking import chunk_tokens
from runtime_ops.embedders.token_counts import counter_for, declared_profile
from runtime_ops.pipeline.chunking import ChunkingProfile
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.documents import Documents
from runtime_ops.store.corpus.profiles import ChunkingProfiles
from runtime_ops.tags import CANDIDATE_ALIAS, PRODUCTION_ALIAS

Chunker = Callable[[str], list[str]]
Log = Callable[[str], None]
# Documents cut and written per transaction.
PAGE = 200


def chunker(profile: ChunkingProfile) -> Chunker:
    """The chunker of `profile`: its measure, limit and overlap."""
    count = counter_for(profile)

    def cut(text: str) -> list[str]:
        return chunk_tokens(text, count=count, max_tokens=profile.max_tokens, overlap_tokens=profile.overlap_tokens)

    return cut


def declared(profiles: ChunkingProfiles, spec: PipelineSpec) -> tuple[int, ChunkingProfile]:
    """(id, profile) of the chunking the pipeline declares (recorded in the store the first time)."""
    profile = declared_profile(spec.embedder, spec.chunking)
    return profiles.ensure(profile), profile


def profiles_in_use(store: StateStore, spec: PipelineSpec) -> dict[int, ChunkingProfile]:
    """id -> profile of every profile the pipeline keeps chunks for, the declared one first."""
    first, profile = declared(store.profiles, spec)
    versions = [
        v for v in (store.registry.alias(PRODUCTION_ALIAS), store.registry.alias(CANDIDATE_ALIAS)) if v is not None
    ]
    versions += [int(row["model_version"]) for row in store.indexes.list_indexes()]
    used = {first: profile}
    for pid in sorted(set(store.profiles.models_by_profile(versions).values()) - {first}):
        used[pid] = store.profiles.get(pid)
    return used


def ensure_chunks(
    documents: Documents,
    profiles: ChunkingProfiles,
    profile_id: int,
    *,
    document_ids: Sequence[int] | None = None,
    profile: ChunkingProfile | None = None,
    log: Log = lambda _: None,
) -> int:
    """Cut the current documents (of `document_ids`, when given) that have no chunks of `profile_id` yet; returns
    how many were cut. Nothing is read but an anti-join when every document has its chunks."""
    cut: Chunker | None = None
    made = after = 0
    while batch := documents.current_without_chunks(profile_id, limit=PAGE, after=after, document_ids=document_ids):
        if cut is None:
            profile = profile or profiles.get(profile_id)
            log(f"cutting documents into chunks of profile {profile.describe()}")
            cut = chunker(profile)
        documents.add_chunks(profile_id, {doc: cut(text) for doc, text in batch})
        made += len(batch)
        after = batch[-1][0]
    if made:
        log(f"cut {made} documents into chunks of profile {profile_id}")
    return made


def ensure_model_chunks(
    documents: Documents,
    profiles: ChunkingProfiles,
    version: int,
    *,
    document_ids: Sequence[int] | None = None,
    log: Log = lambda _: None,
) -> int:
    """`ensure_chunks` for the profile model `version` reads."""
    return ensure_chunks(documents, profiles, profiles.of_model(version), document_ids=document_ids, log=log)
