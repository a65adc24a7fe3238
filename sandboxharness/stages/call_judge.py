"""One candidate call against the reference's, judged on the trusted side: the result files
(read back against the digests bound at the call), the comparison mode of each output, and the
inputs after the call by their digests against the reference's (the inputs themselves are made
again here only where a comparison needs their values). Used per call as the calls come
(``job.execute``) and by the stages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..errors import InfrastructureError
from ..inputs.dists import AMPLIFYING
from ..inputs.tensorgen import make_inputs
from ..models import Definition, Policy
from ..models.verdict import ReasonCode
from .compare import Comparison, amplified_tolerance, compare, compare_exact
from .compare_modes import Resolved, compare_set, resolve, score_input
from .execute import CallResult
from .results import read_bound, read_tensors
from .sampling import judge_sampling
from .session import KernelFault
from .state import InputDigests
from .state import check_inputs as check_inputs_after
from .topk_scores import derived_scores

STATE_KEY = "_state_inputs"


def _compare_output(definition: Definition, resolved: Resolved, item: dict[str, Any],
                    out: torch.Tensor | None, ref: torch.Tensor, *,
                    inputs: dict[str, Any], repeats: torch.Tensor | None,
                    amplified: bool = False) -> Comparison:
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
    tol = resolved.tolerance_for(item["dtype"])
    if amplified:
        tol = amplified_tolerance(tol, ref)
    return compare(name, out, ref, tol, resolved.required_matched_ratio)


def _inputs_after(definition: Definition, resolved: Resolved, cand: CallResult,
                  ref: CallResult, *, got: dict[str, torch.Tensor], want: dict[str, torch.Tensor],
                  original: Callable[[], list[object]]) -> tuple[Comparison | None, list[str]]:
    if ref.reply is None:
        raise KernelFault(ReasonCode.WORKER_PROTOCOL, "the reference's call has no reply")
    digests = InputDigests(ref_pre=ref.reply.pre, ref=ref.bound, cand=cand.bound)
    return check_inputs_after(definition, resolved, cand.case.payload["inputs"],
                              digests=digests, got=got, ref_got=want, original=original)


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
    made: list[list[object]] = []

    def original() -> list[object]:  # the inputs again, on this side, at most once
        if not made:
            made.append(make_inputs(cand.case.payload, cand.seed, "cpu", data_dir))
        return made[0]

    needs_inputs = any(m in ("set", "sampling") for m in resolved.modes.values())
    inputs = ({it["name"]: v for it, v in zip(payload_inputs, original(), strict=False)}
              if needs_inputs else {})
    stats: dict[str, Any] = {}
    dist = (cand.case.payload.get("dists") or {}).get(str(cand.seed), "plain")
    for item in cand.case.payload["outputs"]:
        name = item["name"]
        ref_t = want.get(f"out.{name}")
        if ref_t is None:
            raise KernelFault(ReasonCode.WORKER_PROTOCOL, f"reference produced no {name!r}")
        res = _compare_output(definition, resolved, item, got.get(f"out.{name}"), ref_t,
                              inputs=inputs, repeats=got.get(f"rep.{name}"),
                              amplified=dist in AMPLIFYING)
        stats[name] = {"mode": res.mode, "max_abs": res.max_abs, "max_rel": res.max_rel,
                       "matched_ratio": res.matched_ratio, **res.extra}
        if res.code is not None:
            return res.code, res.message, stats
    if check_inputs:  # state inputs learned from the reference's own post-call inputs
        bad = _inputs_after(definition, resolved, cand, ref, got=got, want=want,
                            original=original)
        if bad[1]:
            stats[STATE_KEY] = bad[1]  # moved to the trial entry by judge()
        if bad[0] is not None and bad[0].code is not None:
            return bad[0].code, bad[0].message, stats
    return None, "ok", stats
