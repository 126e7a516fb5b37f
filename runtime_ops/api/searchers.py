"""The ops API's searchers (one per declared pipeline, kept for the app's lifetime), warm before they are asked.

At start-up the ops API loads each declared pipeline's serving embedder and index and runs one query through them,
and `/readyz` says "warming up" until every pipeline is through it. Loading on the first request cost that request
seconds (an embedder's weights, the index's files) while the next took milliseconds.

The same loop then looks at every pipeline's `retrieval_index` alias every WARM_EVERY_S seconds and loads an index
a promotion or a rollback moved it to, so no request pays for that either (one alias read per pipeline per look);
likewise the candidate index of a pipeline's active rollout (`serving/rollout_search.py`).
A pipeline with no serving index yet is no reason to stay unready: the probe says so and the loop loads the index
once it exists. A pipeline whose load fails (its vector store is down, its weights were collected) is logged and
tried again on the next look; the probe names it, and until it loads its requests load on demand as before.
"""

from __future__ import annotations

import logging
import threading

from fastapi import HTTPException, Request

from runtime_ops.api.deps import OpsContext
from runtime_ops.components.loading import load_specs
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.serving.rollout_search import RolloutSearch
from runtime_ops.serving.search import NoServingIndex, Searcher
from runtime_ops.vectors.base import VectorStoreError
from runtime_ops.vectors.factory import pipeline_vector_store

log = logging.getLogger("runtime_ops.api")

WARM_EVERY_S = 2.0
LOADED, NO_INDEX, FAILED = "loaded", "no serving index yet", "not loaded (retrying)"


class Searchers:
    """One Searcher per pipeline for the app's lifetime (embedders and vector store connections are reused)."""

    def __init__(self, ops: OpsContext) -> None:
        self.ops = ops
        self._lock = threading.Lock()
        self._by_name: dict[str, tuple[PipelineSpec, Searcher]] = {}
        self._routed: dict[str, RolloutSearch] = {}
        self._specs: dict[str, PipelineSpec] | None = None

    def specs(self) -> dict[str, PipelineSpec]:
        if self._specs is None:
            self._specs = load_specs(self.ops.settings)
        return self._specs

    def get(self, name: str | None) -> tuple[PipelineSpec, Searcher]:
        specs = self.specs()
        if name is None:
            name = next(iter(specs)) if len(specs) == 1 else "demo" if "demo" in specs else None
            if name is None:
                raise HTTPException(400, f"several pipelines are declared ({', '.join(sorted(specs))}): name one")
        if name not in specs:
            raise HTTPException(404, f"no pipeline named {name!r}; declared: {', '.join(sorted(specs))}")
        with self._lock:
            found = self._by_name.get(name)
            if found is None:
                spec = specs[name]
                try:
                    vectors = pipeline_vector_store(spec.vector_store)
                except VectorStoreError as exc:
                    raise HTTPException(503, f"pipeline {name}: {exc}") from None
                found = self._by_name[name] = (spec, Searcher(self.ops.store.scoped(name), vectors))
        return found

    def routed(self, name: str | None) -> tuple[PipelineSpec, RolloutSearch]:
        """The pipeline's searcher behind its rollout routing (production alone while no rollout is active)."""
        spec, searcher = self.get(name)
        with self._lock:
            found = self._routed.get(spec.name)
            if found is None:
                found = self._routed[spec.name] = RolloutSearch(spec, searcher)
        return spec, found

    def close(self) -> None:
        with self._lock:
            for routed in self._routed.values():
                routed.close()


class ServingWarmup:
    """Per declared pipeline: not looked at yet, loaded, no serving index yet, or failed to load."""

    def __init__(self, searchers: Searchers) -> None:
        self.searchers = searchers
        self._state: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def left(self) -> list[str]:
        """The declared pipelines not yet through their first warm-up."""
        with self._lock:
            return sorted(name for name in self.searchers.specs() if name not in self._state)

    def notes(self) -> str | None:
        """What a ready probe should say about pipelines that do not serve warm: which have no index yet, which
        failed to load (None: every one serves warm)."""
        with self._lock:
            by_state: dict[str, list[str]] = {}
            for name, state in sorted(self._state.items()):
                if state != LOADED:
                    by_state.setdefault(state, []).append(name)
        return "; ".join(f"{state}: {', '.join(names)}" for state, names in sorted(by_state.items())) or None

    def warm_all(self) -> None:
        """One look at every declared pipeline: load its serving index where it is not loaded yet."""
        for name in self.searchers.specs():
            try:
                _, searcher = self.searchers.get(name)
                before = searcher.warmed
                index_id = searcher.warm()
                state = LOADED
                if index_id != before:
                    log.info(f"pipeline {name}: serving index #{index_id} loaded")
                self._warm_candidate(name)
            except NoServingIndex as exc:
                state = NO_INDEX
                log.debug(f"pipeline {name}: {exc}")
            except Exception as exc:  # a load that fails is tried again; the process keeps serving
                state = FAILED
                with self._lock:
                    again = self._state.get(name) == FAILED
                # Said once when it starts failing, not at every look.
                (log.debug if again else log.warning)(
                    f"pipeline {name}: could not load its serving index, retrying every {WARM_EVERY_S:g} s: {exc}"
                )
            with self._lock:
                self._state[name] = state

    def _warm_candidate(self, name: str) -> None:
        """The active rollout's candidate index, if any; a failure leaves production serving warm (its requests fall
        back to production until the candidate loads)."""
        try:
            _, routed = self.searchers.routed(name)
            routed.warm()
        except Exception as exc:
            log.debug(f"pipeline {name}: could not load the rollout's candidate index, retrying: {exc}")

    def start(self) -> None:
        """`warm_all` now and every WARM_EVERY_S seconds until `stop`, in a thread of its own: loading blocks, and
        must neither hold one of the request threads nor keep the process from exiting."""
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="runtime-ops-serving-warmup", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)  # a load under way finishes on its own; the thread dies with the process
            self._thread = None

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.warm_all()
            except Exception:  # the loop outlives what went wrong this time: the next look tries again
                log.exception("could not look at the pipelines' serving indexes; retrying")
            self._stopping.wait(WARM_EVERY_S)


async def get_warmup(request: Request) -> ServingWarmup:
    warmup: ServingWarmup = request.app.state.warmup
    return warmup
