"""Judge correctness on the trusted side: candidate files vs reference files vs regenerated inputs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from ..errors import InfrastructureError, InputError
from ..inputs.tensorgen import make_inputs
from ..models import Definition, Policy, StageResult
from ..models.verdict import Reason, ReasonCode, Stage
from . import honesty
from .compare import Comparison, compare, compare_exact
from .compare_modes import Resolved, compare_set, resolve, score_input
from .context import EvaluationContext, Needs, SoFar, skipped
from .execute import CallResult, RoleRun
from .job import execution
from .results import read_bound, read_tensors
from .sampling import judge_sampling
from .session import KernelFault
from .state import check_inputs as check_inputs_after
from .topk_scores import derived_scores

_STATE_KEY = "_state_inputs"


def _compare_output(definition: Definition, resolved: Resolved, item: dict[str, Any],
                    out: torch.Tensor | None, ref: torch.Tensor, *,
                    inputs: dict[str, Any], repeats: torch.Tensor | None) -> Comparison:
    name = item["name"]
    mode = resolved.modes.get(name, "tolerance")
    if mode == "exact":
        return compare_exact(name, out, ref)
    if mode == "set":
        scores = score_input(definition, name, inputs, tuple(ref.shape))
        if scores is not None:
            return compare_set(name, out, ref, scores)
        scores = derived_scores(definition, inputs)  # FIB's own scores for known families
        return compare_set(name, out, ref, scores, tol=resolved.tolerance_for("float32"),
                           ratio=resolved.required_matched_ratio)
    if mode == "sampling":
        own = judge_sampling(definition, name, ref, ref, inputs=inputs, rules=resolved.sampling)
        if own.code is not None:  # the check disagrees with the definition: not the kernel's fault
            raise InfrastructureError(f"the sampling check rejects the reference's own sample "
                                      f"({own.message}); it cannot judge {definition.name}")
        return judge_sampling(definition, name, out, ref, inputs=inputs, rules=resolved.sampling,
                              repeats=repeats)
    return compare(name, out, ref, resolved.tolerance_for(item["dtype"]),
                   resolved.required_matched_ratio)


def judge_call(definition: Definition, policy: Policy, cand: CallResult, ref: CallResult, *,
               cand_dir: Path, ref_dir: Path, data_dir: str,
               check_inputs: bool = True) -> tuple[ReasonCode | None, str, dict[str, Any]]:
    """(code or None, message, stats) for one candidate call against the reference's."""
    cap = policy.limits.max_result_mb * 1024 * 1024
    if cand.error is not None:
        return ReasonCode.RUNTIME_ERROR, cand.error, {}
    if cand.file is None or ref.file is None or cand.reply is None:
        return ReasonCode.WORKER_PROTOCOL, "no result file for this call", {}
    described = cand.reply.outputs
    names = [o["name"] for o in cand.case.payload["outputs"]]
    if cand.reply.n_outputs != len(names):
        return (ReasonCode.INCORRECT_TYPE,
                f"returned {cand.reply.n_outputs} output(s), expected {len(names)}", {})
    for name, d in zip(names, described, strict=False):
        if isinstance(d, dict) and d.get("type") != "torch.Tensor":
            return ReasonCode.INCORRECT_TYPE, f"output {name!r} is a {d.get('type')}", {}
    try:
        got = read_bound(cand_dir / cand.file, cap, cand.bound)
    except KernelFault as fault:
        return fault.code, fault.message, {}
    want = read_tensors(ref_dir / ref.file, cap)
    resolved = resolve(definition, policy.correctness)
    payload_inputs = cand.case.payload["inputs"]
    needs_inputs = check_inputs or any(m in ("set", "sampling") for m in resolved.modes.values())
    original = make_inputs(cand.case.payload, cand.seed, "cpu", data_dir) if needs_inputs else []
    inputs = {it["name"]: v for it, v in zip(payload_inputs, original, strict=False)}
    stats: dict[str, Any] = {}
    for item in cand.case.payload["outputs"]:
        name = item["name"]
        ref_t = want.get(f"out.{name}")
        if ref_t is None:
            raise KernelFault(ReasonCode.WORKER_PROTOCOL, f"reference produced no {name!r}")
        res = _compare_output(definition, resolved, item, got.get(f"out.{name}"), ref_t,
                              inputs=inputs, repeats=got.get(f"rep.{name}"))
        stats[name] = {"mode": res.mode, "max_abs": res.max_abs, "max_rel": res.max_rel,
                       "matched_ratio": res.matched_ratio, **res.extra}
        if res.code is not None:
            return res.code, res.message, stats
    if check_inputs:  # state inputs learned from the reference's own post-call inputs
        bad, state = check_inputs_after(definition, resolved, payload_inputs, original=original,
                                        got=got, ref_got=want)
        if state:
            stats[_STATE_KEY] = state  # moved to the trial entry by judge()
        if bad is not None and bad.code is not None:
            return bad.code, bad.message, stats
    return None, "ok", stats


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
        code, msg, stats = judge_call(definition, policy, call, ref_call, cand_dir=cand_dir,
                                      ref_dir=ref_dir, data_dir=data_dir)
        state = stats.pop(_STATE_KEY, None)
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
        details["coverage_notes"] = run.cases.notes  # where held-out coverage was reduced
        return StageResult(stage=self.stage, status="failed" if reasons else "passed",
                           duration_s=cand.wall_s.get("correctness", 0.0) + time.monotonic() - t0,
                           reasons=reasons, details=details)
