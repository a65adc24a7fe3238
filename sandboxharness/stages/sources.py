"""Policy and static stages: everything decided from the sources alone, before anything runs,
from one analysis shared by both stages.

Every reason code comes from the rule that found the problem (``policy``): a violation
carries its own, an analyser's finding gets its code from the policy's threshold.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..models import Definition, Policy, Reason, Solution, Stage, StageResult
from ..policy import solution_violations, static_code
from .context import EvaluationContext, Needs, SoFar

if TYPE_CHECKING:
    from ..static import StaticReport


def run(definition: Definition, solution: Solution, policy: Policy, workdir: Path, *,
        report: StaticReport | None = None) -> list[StageResult]:
    """``report``: this solution's analysis, already made in a batch (``run_static_batch``)."""
    from ..static import run_static

    t0 = time.monotonic()
    reasons = [v.reason() for v in solution_violations(solution, policy)]
    if reasons:  # do not even hand oversized or disallowed sources to the analysers
        return [StageResult(stage=Stage.POLICY, status="failed", duration_s=time.monotonic() - t0,
                            reasons=reasons),
                StageResult(stage=Stage.STATIC, status="skipped", duration_s=0.0,
                            details={"reason": "not run: the policy stage rejected the sources"})]
    workdir.mkdir(parents=True, exist_ok=True)
    t1 = time.monotonic()
    if report is None:
        report = run_static(solution, definition, policy, workdir)
        static_s = time.monotonic() - t1
    else:  # its share of the batch
        static_s = sum(report.durations.values())
    policy_reasons = [v.reason() for v in report.violations]
    static_reasons = [Reason(code=static_code(f), stage=Stage.STATIC,
                             message=f"{f.tool} {f.rule_id} at {f.location()}: {f.message}")
                      for f in report.flagged]
    policy_result = StageResult(
        stage=Stage.POLICY, status="failed" if policy_reasons else "passed",
        duration_s=t1 - t0, reasons=policy_reasons,
        details={"language": solution.spec.language.value, "sources": len(solution.sources)})
    static_result = StageResult(
        stage=Stage.STATIC, status="failed" if static_reasons else "passed",
        duration_s=static_s, reasons=static_reasons,
        details={"findings": [asdict(f) for f in report.findings], "tools": report.tools,
                 "durations_s": report.durations,
                 **({"batch": report.batch} if report.batch > 1 else {})})
    return [policy_result, static_result]


def _both(ctx: EvaluationContext, so_far: SoFar) -> list[StageResult]:
    results: list[StageResult] = so_far.shared("precheck", lambda: run(
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
