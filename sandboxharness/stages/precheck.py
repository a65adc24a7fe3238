"""Policy and static stages: everything decided from the sources alone, before anything runs."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from ..models import Definition, Policy, Reason, ReasonCode, Solution, Stage, StageResult

_POLICY_RULES = {
    "policy.import-denied": ReasonCode.POLICY_IMPORT,
    "policy.import-not-allowed": ReasonCode.POLICY_IMPORT,
    "policy.baseline-call": ReasonCode.POLICY_BASELINE_CALL,
    # a source named like a real module (torch.py) would replace it in the worker
    "policy.module-shadowing": ReasonCode.POLICY_IMPORT,
    "policy.native-artifact": ReasonCode.POLICY_LANGUAGE,
    "policy.unparsable-source": ReasonCode.COMPILE_ERROR,
    "policy.invalid-source": ReasonCode.COMPILE_ERROR,
}
# Findings that are really "this does not compile": same code as a failed import would give.
_STATIC_CODES = {"ast.syntax-error": ReasonCode.COMPILE_ERROR,
                 "bandit.syntax-error": ReasonCode.COMPILE_ERROR}


def _policy_reasons(solution: Solution, policy: Policy) -> list[Reason]:
    reasons = []
    lang = solution.spec.language
    if lang not in policy.languages:
        allowed = ", ".join(sorted(x.value for x in policy.languages))
        reasons.append(Reason(code=ReasonCode.POLICY_LANGUAGE, stage=Stage.POLICY,
                              message=f"language {lang.value!r} is not allowed ({allowed})"))
    total = sum(len(s.content.encode()) for s in solution.sources)
    if total > policy.max_source_bytes or len(solution.sources) > policy.max_sources:
        reasons.append(Reason(code=ReasonCode.POLICY_SOURCE_SIZE, stage=Stage.POLICY,
                              message=f"{len(solution.sources)} source(s), {total} bytes; policy "
                              f"allows {policy.max_sources} and {policy.max_source_bytes} bytes"))
    return reasons


def run(definition: Definition, solution: Solution, policy: Policy,
        workdir: Path) -> list[StageResult]:
    from ..static import run_static

    t0 = time.monotonic()
    reasons = _policy_reasons(solution, policy)
    if reasons:  # do not even hand oversized or disallowed sources to the analysers
        return [StageResult(stage=Stage.POLICY, status="failed", duration_s=time.monotonic() - t0,
                            reasons=reasons),
                StageResult(stage=Stage.STATIC, status="skipped", duration_s=0.0,
                            details={"reason": "not run: the policy stage rejected the sources"})]
    workdir.mkdir(parents=True, exist_ok=True)
    t1 = time.monotonic()
    report = run_static(solution, definition, policy, workdir)
    static_s = time.monotonic() - t1
    findings = [asdict(f) for f in report.findings]
    static_reasons, policy_reasons = [], []
    for f in report.blocking:
        code = _POLICY_RULES.get(f.rule_id)
        msg = f"{f.tool} {f.rule_id} at {f.location()}: {f.message}"
        if code is not None:
            policy_reasons.append(Reason(code=code, stage=Stage.POLICY, message=msg))
        else:
            static_reasons.append(Reason(
                code=_STATIC_CODES.get(f.rule_id, ReasonCode.STATIC_FINDING),
                stage=Stage.STATIC, message=msg))
    policy_result = StageResult(
        stage=Stage.POLICY, status="failed" if policy_reasons else "passed",
        duration_s=t1 - t0, reasons=policy_reasons,
        details={"language": solution.spec.language.value, "sources": len(solution.sources)})
    static_result = StageResult(
        stage=Stage.STATIC, status="failed" if static_reasons else "passed",
        duration_s=static_s, reasons=static_reasons,
        details={"findings": findings, "tools": report.tools, "durations_s": report.durations})
    return [policy_result, static_result]
