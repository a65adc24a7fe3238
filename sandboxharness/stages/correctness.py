"""Judge correctness on the trusted side: candidate files vs reference files vs regenerated inputs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..archive.collect import output_summary, publish
from ..errors import InputError
from ..models import Definition, Policy, StageResult
from ..models.verdict import Reason, ReasonCode, Stage
from . import honesty
from .call_judge import STATE_KEY, judge_call
from .compare_modes import resolve
from .context import EvaluationContext, Needs, SoFar, skipped
from .execute import CallResult, RoleRun
from .job import execution, host_times


def judged(call: CallResult) -> tuple[ReasonCode | None, str, dict[str, Any]] | None:
    """The judgment made as the call came (``job.execute``), re-raising what judging raised."""
    if call.judged is None:
        return None
    if isinstance(call.judged, BaseException):
        raise call.judged
    code, msg, stats = call.judged
    return code, msg, dict(stats)


def judge(definition: Definition, policy: Policy, cand: RoleRun, ref: RoleRun, *,
          cand_dir: Path, ref_dir: Path, data_dir: str) -> tuple[list[Reason], dict[str, Any]]:
    ref_by_key = {(c.case.id, c.trial): c for c in ref.calls}
    reasons: list[Reason] = []
    dropped: set[str] = set()
    cases: dict[str, dict[str, Any]] = {}
    for call in cand.calls:
        if call.sampled_index is not None:  # re-checks of timed calls: the benchmark's
            continue
        ref_call = ref_by_key.get((call.case.id, call.trial))
        entry = cases.setdefault(call.case.id, {
            "workload": call.case.workload, "axes": call.case.axes,
            "heldout": call.case.heldout, "trials": []})
        if ref_call is None or ref_call.error is not None:
            if call.case.heldout:
                dropped.add(call.case.id)  # the definition itself rejects this size
                continue
            raise InputError(f"the definition's reference failed on workload "
                             f"{call.case.workload}: {ref_call.error if ref_call else 'no result'}",
                             where=definition.name)
        code, msg, stats = judged(call) or judge_call(
            definition, policy, call, ref_call, cand_dir=cand_dir, ref_dir=ref_dir,
            data_dir=data_dir)
        state = stats.pop(STATE_KEY, None)
        entry["trials"].append({"seed": call.seed, "dist": call.case.dist(call.seed),
                                "status": code.value if code else "PASSED", "outputs": stats,
                                **({"state_inputs": state} if state else {})})
        if code is not None and not any(r.code == code for r in reasons):
            where = "held-out size" if call.case.heldout else "workload"
            reasons.append(Reason(code=code, stage=Stage.CORRECTNESS,
                                  message=f"{where} {call.case.axes}, seed {call.seed}, "
                                  f"dist={call.case.dist(call.seed)}: {msg}"))
    for cid in dropped:
        cases.pop(cid, None)
    details = {"cases": list(cases.values()), "trials_per_case": policy.correctness.trials,
               "heldout_dropped": sorted(dropped),
               "comparison": resolve(definition, policy.correctness).describe()}
    return reasons, details


class CorrectnessStage:
    """Every correctness call against the reference's, then the honesty checks: each call
    held to what it returned, in the declared language."""

    stage = Stage.CORRECTNESS
    needs = Needs.GPU

    def run(self, ctx: EvaluationContext, so_far: SoFar) -> StageResult:
        why = so_far.blocked()
        if why:
            return skipped(self.stage, why)
        t0 = time.monotonic()
        run = execution(ctx, so_far)
        publish(so_far, "outputs/summary.json", output_summary(run))
        cand = run.cand
        if run.ref is None or cand.fault is not None and cand.fault_phase == "correctness":
            # the candidate's process died or misbehaved before it finished its calls
            fault = cand.fault
            reasons = [Reason(code=fault.code if fault else ReasonCode.WORKER_PROTOCOL,
                              stage=self.stage, message=fault.message if fault else "no results")]
            details: dict[str, Any] = {"log_tail": cand.exit.stderr[-2000:] if cand.exit else ""}
        else:
            reasons, details = judge(ctx.definition, ctx.policy, cand, run.ref,
                                     cand_dir=run.cand_dir, ref_dir=run.ref_dir,
                                     data_dir=str(run.data_dir))
            if not reasons:
                reasons = honesty.rebound(cand) or honesty.launches(ctx.language, cand)
        details["root_seed"] = ctx.seed
        details["host_s"] = host_times(run)
        details["coverage_notes"] = run.cases.notes  # where held-out coverage was reduced
        return StageResult(stage=self.stage, status="failed" if reasons else "passed",
                           duration_s=cand.wall_s.get("correctness", 0.0) + time.monotonic() - t0,
                           reasons=reasons, details=details)
