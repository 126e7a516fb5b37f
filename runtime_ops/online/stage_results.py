"""A ramp's stages as results (pure): each stage's share, interval, query count and verdict, and the ramp's outcome
in one word, for the approval page, the Slack message, the CLI, `status` and the JSON API alike.

A stage is one canary rollout row (`store.serving.rollouts`), judged on its own requests (`approvals/ramp.py`'s
`stage_evidence`); its evidence is passed in already computed, so this module reads nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runtime_ops.online.evidence import OnlineEvidence

# The ramp's outcome, as `approvals list` and the rollout gauges name it.
NO_RAMP, RAMPING, PASSED, ROLLED_BACK, HALTED = "-", "ramping", "passed", "rolled back", "halted"
_OUTCOME = {"active": RAMPING, "completed": PASSED, "rolled_back": ROLLED_BACK, "stopped": HALTED}


def ramp_outcome(stages: Sequence[dict[str, Any]]) -> str:
    """One word for where a ramp is: "-" (none ran), ramping, passed, rolled back or halted. Only the last stage
    counts: a stage completes before the last one only as the next one starts (one transaction), so a completed
    last stage is the ramp passed."""
    if not stages:
        return NO_RAMP
    status = str(stages[-1]["status"])
    return _OUTCOME.get(status, status)


@dataclass(frozen=True)
class StageResult:
    stage: int  # 1-based, as people count
    share: float
    status: str  # active | completed | rolled_back | stopped
    started_at: datetime
    ended_at: datetime | None
    reason: str | None
    evidence: OnlineEvidence | None  # None: it could not be computed
    max_loss: float | None = None  # the stage's rule (`rollout.max_loss`), shown beside its verdict

    @classmethod
    def of(cls, row: dict[str, Any], evidence: OnlineEvidence | None, *, max_loss: float | None = None) -> StageResult:
        return cls(
            stage=int(row["stage"]) + 1,
            share=float(row["share"]),
            status=str(row["status"]),
            started_at=row["started_at"],
            ended_at=row.get("ended_at"),
            reason=row.get("reason"),
            evidence=evidence,
            max_loss=max_loss,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stage": self.stage,
            "share": self.share,
            "status": self.status,
            "outcome": _OUTCOME.get(self.status, self.status),
            "started_at": self.started_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "reason": self.reason,
            "queries": None,
            "min_queries": None,
            "verdict": None,
            "max_loss": self.max_loss,
        }
        e = self.evidence
        if e is not None:
            out.update(queries=e.queries, min_queries=e.min_queries, verdict=e.verdict, requests=e.requests)
            if e.caveat:
                out["caveat"] = e.caveat
            rate = e.feedback_rate
            if rate is not None:
                out["feedback_rate"] = {
                    "candidate": [rate.candidate_positive, rate.candidate_n],
                    "production": [rate.production_positive, rate.production_n],
                    "difference": rate.difference,
                    "low": rate.interval.low,
                    "high": rate.interval.high,
                    "confidence": rate.confidence,
                }
        return out

    def line(self) -> str:
        """e.g. "stage 1 (5% of sessions) completed: 120 candidate requests, positive-feedback rate 0.300 vs
        0.250, difference +0.050 [95% CI -0.040, +0.140], no difference yet (min 100)"."""
        head = f"stage {self.stage} ({self.share:.0%} of sessions) {_OUTCOME.get(self.status, self.status)}"
        e = self.evidence
        if e is None:
            return f"{head}: evidence unavailable"
        text = f"{head}: {e.queries} candidate requests"
        rate = e.feedback_rate
        if rate is not None:
            text += (
                f", positive-feedback rate {_rate(rate.candidate_positive, rate.candidate_n)} vs "
                f"{_rate(rate.production_positive, rate.production_n)}, difference {rate.difference:+.3f} "
                f"[{rate.confidence:.0%} CI {rate.interval.low:+.3f}, {rate.interval.high:+.3f}]"
            )
        rule = f"min {e.min_queries}" + (f", max_loss {self.max_loss:g}" if self.max_loss is not None else "")
        text += f", {e.verdict} ({rule})"
        if e.caveat:
            text += f" ({e.caveat})"
        if self.status != "active" and self.reason:
            text += f"; {self.reason}"
        return text


def _rate(positive: int, n: int) -> str:
    return f"{positive / n:.3f}" if n else "n/a"
