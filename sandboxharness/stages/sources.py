"""Policy and static stages as stages: both judge the sources alone, from one analysis."""

from __future__ import annotations

from ..models import Stage, StageResult
from . import precheck
from .context import EvaluationContext, Needs, SoFar


def _both(ctx: EvaluationContext, so_far: SoFar) -> list[StageResult]:
    results: list[StageResult] = so_far.shared("precheck", lambda: precheck.run(
        ctx.definition, ctx.solution, ctx.policy, ctx.root / "static",
        report=ctx.static_report))
    return results


class PolicyStage:
    stage = Stage.POLICY
    needs = Needs.CPU

    def run(self, ctx: EvaluationContext, so_far: SoFar) -> StageResult:
        return _both(ctx, so_far)[0]


class StaticStage:
    stage = Stage.STATIC
    needs = Needs.CPU

    def run(self, ctx: EvaluationContext, so_far: SoFar) -> StageResult:
        return _both(ctx, so_far)[1]
