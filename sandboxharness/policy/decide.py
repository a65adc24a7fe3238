"""The promotion stage: the decision over every stage's result."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..models import Policy, Stage, StageResult
from .gates import RequiredStages

__all__ = ["decide"]


def decide(stages: Sequence[StageResult], policy: Policy) -> StageResult:
    """Skipped when an earlier stage rejected the candidate; otherwise failed unless every
    required stage passed. The speed gates are part of the benchmark stage's own result."""
    t0 = time.monotonic()
    if any(s.status == "failed" for s in stages):
        return StageResult(stage=Stage.PROMOTION, status="skipped", duration_s=0.0,
                           details={"reason": "an earlier stage rejected the candidate"})
    reasons = RequiredStages(policy.required_stages).check(stages)
    return StageResult(stage=Stage.PROMOTION, status="failed" if reasons else "passed",
                       duration_s=time.monotonic() - t0, reasons=reasons,
                       details={"required": policy.required_stages})
