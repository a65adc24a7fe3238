"""Compile stage: the candidate's worker builds or imports it (the first phase of its run)."""

from __future__ import annotations

import time
from typing import Any

from ..archive.collect import publish, worker_logs
from ..models import Reason, Stage, StageResult
from ..worker.protocol import COMPILE_LOG
from . import compile_cuda
from .context import GPU_LANGUAGES, EvaluationContext, Needs, SoFar, skipped
from .job import execution


class CompileStage:
    stage = Stage.COMPILE
    needs = Needs.GPU

    def run(self, ctx: EvaluationContext, so_far: SoFar) -> StageResult:
        why = so_far.blocked()
        if why:
            return skipped(self.stage, why)
        t0 = time.monotonic()
        run = execution(ctx, so_far)
        cand = run.cand
        details: dict[str, Any] = {"import_s": cand.import_s, "wall_s": cand.wall_s.get("compile"),
                                   "log_tail": (cand.exit.stderr[-2000:] if cand.exit else "")}
        for name, text in worker_logs(run).items():  # the details keep a tail; the archive all
            publish(so_far, name, text)
        if ctx.on_gpu and ctx.language in GPU_LANGUAGES:  # GPU: the nvcc log
            out_dir, key = ctx.root / "candidate" / "out", ctx.solution.content_hash()
            details.update(compile_cuda.summarize(out_dir, key))
            log = compile_cuda.read_capped(compile_cuda.build_dir(out_dir, key) / COMPILE_LOG)
            if log is not None:
                publish(so_far, "logs/compiler.log", log)
        if cand.fault is not None and cand.fault_phase == "compile":
            return StageResult(stage=self.stage, status="failed",
                               duration_s=time.monotonic() - t0, details=details,
                               reasons=[Reason(code=cand.fault.code, stage=self.stage,
                                               message=cand.fault.message)])
        return StageResult(stage=self.stage, status="passed",
                           duration_s=cand.wall_s.get("compile", 0.0), details=details)
