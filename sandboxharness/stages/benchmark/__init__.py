"""Benchmark stage: the timed calls judged on the trusted side (``timing``); on a GPU also
the baselines, the regime/repeat promotion gate (``baselines``) and the roofline
(``roofline``)."""

from __future__ import annotations

import time

from ...models import Reason, Stage, StageResult
from .. import honesty
from ..context import EvaluationContext, Needs, SoFar, skipped
from ..job import execution, host_times
from . import baselines, timing


class BenchmarkStage:
    stage = Stage.BENCHMARK
    needs = Needs.EXCLUSIVE_GPU

    def run(self, ctx: EvaluationContext, so_far: SoFar) -> StageResult:
        why = so_far.blocked()
        if why:
            return skipped(self.stage, why)
        t0 = time.monotonic()
        run = execution(ctx, so_far)
        cand = run.cand
        if run.ref is None:  # cannot happen once correctness passed; never judge without it
            return skipped(self.stage, "not run: the candidate is not correct")
        reasons, details = timing.judge(ctx.definition, ctx.policy, cand, run.ref,
                                        cand_dir=run.cand_dir, ref_dir=run.ref_dir,
                                        data_dir=str(run.data_dir), device=ctx.device,
                                        language=ctx.language,
                                        own=honesty.own_kernels(ctx.solution))
        if cand.fault is not None and cand.fault_phase == "benchmark":
            reasons.insert(0, Reason(code=cand.fault.code, stage=self.stage,
                                     message=cand.fault.message))
        if ctx.on_gpu and cand.benches:  # GPU: baselines, promotion gate, roofline
            g_reasons, g_details = baselines.extend_benchmark(ctx, run)
            reasons.extend(g_reasons)
            details.update(g_details)
        details["host_s"] = host_times(run)
        if run.ref.timed_by is not None:  # FlashInfer-Bench's practice: once per workload
            details["reference_timed_by"] = run.ref.timed_by
        return StageResult(stage=self.stage, status="failed" if reasons else "passed",
                           duration_s=cand.wall_s.get("benchmark", 0.0) + time.monotonic() - t0,
                           reasons=reasons, details=details)


__all__ = ["BenchmarkStage", "baselines", "timing"]
