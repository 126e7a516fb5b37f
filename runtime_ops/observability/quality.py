"""Production's live quality for `/metrics`: the CUSUM of `online/quality_cusum.py` over each pipeline's production
judgements since its promotion, kept between scrapes so a scrape reads only what is new.

Bins are fixed slots of the epoch (`bin_seconds`), judgements fall in their request's slot, and the state store is
the only input: every ops API replica computes the same statistic. A slot is *settled* `settle` after it ends
(feedback on a request usually comes within seconds; later feedback on a settled slot is not counted). Settled slots
move the kept statistic; the slots since are tested on a copy at each scrape, so the gauge follows the judgements
within a scrape while the kept state changes only once per slot. A new production version (a promotion or a
rollback) starts a new statistic; a restarted API rebuilds it from the store (at most `horizon` back).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from prometheus_client.core import Metric

from runtime_ops.observability.exposition import add_value, family_of
from runtime_ops.online.quality_cusum import DEFAULT_DESIGN, CusumDesign, QualityCusum
from runtime_ops.store import StateStore


@dataclass
class _Production:
    version: int
    settled_until: datetime  # the end of the last slot the kept statistic has seen
    cusum: QualityCusum


class QualityTracker:
    def __init__(
        self,
        store: StateStore,
        design: CusumDesign = DEFAULT_DESIGN,
        settle: timedelta = timedelta(minutes=2),
        horizon: timedelta = timedelta(days=1),
    ) -> None:
        self.store = store.scoped(None)
        self.design = design
        self.settle = settle
        self.horizon = horizon
        self._state: dict[str, _Production] = {}

    def _slot(self, at: datetime) -> datetime:
        """The start of the slot holding `at`."""
        s = self.design.bin_seconds
        return datetime.fromtimestamp(int(at.timestamp()) // s * s, UTC)

    def _feed(self, cusum: QualityCusum, pipeline: str, version: int, start: datetime, end: datetime) -> None:
        """Add the slots from `start` to `end` (slot boundaries; the last may be the slot in progress), quiet ones
        included: the reference's lag is time, not judgements."""
        s = self.design.bin_seconds
        slots = max(0, -(-int((end - start).total_seconds()) // s))
        if not slots:
            return
        helpful, judged = [0] * slots, [0] * slots
        for at, is_helpful in self.store.scoped(pipeline).judgements.of_production(version, start, end):
            i = min(int((at - start).total_seconds()) // s, slots - 1)
            judged[i] += 1
            helpful[i] += is_helpful
        for h, n in zip(helpful, judged, strict=True):
            cusum.add(h, n)

    def update(self, now: datetime) -> dict[str, tuple[int, QualityCusum]]:
        """Each pipeline's production version and its statistic as of `now` (slots in progress included)."""
        live: dict[str, tuple[int, QualityCusum]] = {}
        productions = {a["pipeline"]: a for a in self.store.registry.aliases("production")}
        for gone in set(self._state) - set(productions):
            del self._state[gone]
        for pipeline, alias in sorted(productions.items()):
            version = int(alias["target"])
            state = self._state.get(pipeline)
            if state is None or state.version != version:
                start = self._slot(max(alias["updated_at"], now - self.horizon))
                state = self._state[pipeline] = _Production(version, start, QualityCusum(self.design))
            settled = self._slot(now - self.settle)
            if settled > state.settled_until:
                self._feed(state.cusum, pipeline, version, state.settled_until, settled)
                state.settled_until = settled
            cusum = state.cusum.copy()
            self._feed(cusum, pipeline, version, state.settled_until, now)
            live[pipeline] = (version, cusum)
        return live

    def families(self, now: datetime) -> list[Metric]:
        statistic = family_of("runtime_ops_quality_cusum")
        threshold = family_of("runtime_ops_quality_cusum_threshold")
        reference = family_of("runtime_ops_quality_reference_helpful_ratio")
        for pipeline, (version, cusum) in self.update(now).items():
            add_value(statistic, [pipeline, str(version)], cusum.statistic)
            add_value(threshold, [pipeline], self.design.threshold)
            if cusum.reference_share is not None:
                add_value(reference, [pipeline, str(version)], cusum.reference_share)
        return [statistic, threshold, reference]
