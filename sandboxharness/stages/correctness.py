"""Judge correctness on the trusted side: candidate files vs reference files vs regenerated inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from ..models import Definition, Policy
from ..models.verdict import Reason, ReasonCode, Stage
from ..worker.tensorgen import make_inputs
from .compare import compare
from .execute import CallResult, RoleRun
from .results import read_bound, read_tensors
from .session import KernelFault


def _inputs_unchanged(call: CallResult, got: dict[str, torch.Tensor], data_dir: str) -> str | None:
    original = make_inputs(call.case.payload, call.seed, "cpu", data_dir)
    for item, value in zip(call.case.payload["inputs"], original, strict=True):
        if not isinstance(value, torch.Tensor):
            continue
        after = got.get(f"in.{item['name']}")
        if after is None or after.shape != value.shape or not torch.equal(after, value):
            return f"input {item['name']!r} was modified by the call"
    return None


def judge_call(definition: Definition, policy: Policy, cand: CallResult, cand_dir: Path,
               ref: CallResult, ref_dir: Path, data_dir: str,
               check_inputs: bool = True) -> tuple[ReasonCode | None, str, dict[str, Any]]:
    """(code or None, message, stats) for one candidate call against the reference's."""
    cap = policy.limits.max_result_mb * 1024 * 1024
    if cand.error is not None:
        return ReasonCode.RUNTIME_ERROR, cand.error, {}
    if cand.file is None or ref.file is None or cand.reply is None:
        return ReasonCode.WORKER_PROTOCOL, "no result file for this call", {}
    described = cand.reply.get("outputs") or []
    names = [o["name"] for o in cand.case.payload["outputs"]]
    if cand.reply.get("n_outputs") != len(names):
        return (ReasonCode.INCORRECT_TYPE,
                f"returned {cand.reply.get('n_outputs')} output(s), expected {len(names)}", {})
    for name, d in zip(names, described, strict=False):
        if isinstance(d, dict) and d.get("type") != "torch.Tensor":
            return ReasonCode.INCORRECT_TYPE, f"output {name!r} is a {d.get('type')}", {}
    try:
        got = read_bound(cand_dir / cand.file, cap, cand.bound)
    except KernelFault as fault:
        return fault.code, fault.message, {}
    want = read_tensors(ref_dir / ref.file, cap)
    stats: dict[str, Any] = {}
    for item in cand.case.payload["outputs"]:
        name = item["name"]
        ref_t = want.get(f"out.{name}")
        if ref_t is None:
            raise KernelFault(ReasonCode.WORKER_PROTOCOL, f"reference produced no {name!r}")
        tol = policy.correctness.tolerance_for(item["dtype"])
        res = compare(name, got.get(f"out.{name}"), ref_t, tol,
                      policy.correctness.required_matched_ratio)
        stats[name] = {"max_abs": res.max_abs, "max_rel": res.max_rel,
                       "matched_ratio": res.matched_ratio}
        if res.code is not None:
            return res.code, res.message, stats
    if check_inputs:
        msg = _inputs_unchanged(cand, got, data_dir)
        if msg:
            return ReasonCode.INPUT_MUTATED, msg, stats
    return None, "ok", stats


def judge(definition: Definition, policy: Policy, cand: RoleRun, ref: RoleRun,
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
        code, msg, stats = judge_call(definition, policy, call, cand_dir, ref_call, ref_dir,
                                      data_dir)
        entry["trials"].append({"seed": call.seed, "status": code.value if code else "PASSED",
                                "outputs": stats})
        if code is not None and not any(r.code == code for r in reasons):
            where = "held-out size" if call.case.heldout else "workload"
            reasons.append(Reason(code=code, stage=Stage.CORRECTNESS,
                                  message=f"{where} {call.case.axes}, seed {call.seed}: {msg}"))
    for cid in dropped:
        cases.pop(cid, None)
    details = {"cases": list(cases.values()), "trials_per_case": policy.correctness.trials,
               "heldout_dropped": sorted(dropped)}
    return reasons, details
