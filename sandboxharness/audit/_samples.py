"""Realistic, deterministic Verdicts for tests, benchmarks and docs (not test doubles:
they are real model instances, validated like any other)."""

from __future__ import annotations

import hashlib

from ..models import Candidate, Environment, Reason, ReasonCode, Stage, StageResult, Subject, Verdict


def _tag(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def sample_verdict(i: int, *, decision: str | None = None, author: str = "llm-author-a",
                   definition: str = "gemm_n4096_k4096", name: str | None = None,
                   started_at: str = "2025-06-01T12:00:00.000Z") -> Verdict:
    """Verdict number ``i``: even numbers promote, odd ones reject (unless ``decision``)."""
    decision = decision or ("promote" if i % 2 == 0 else "reject")
    reasons = [] if decision == "promote" else [
        Reason(code=ReasonCode.INCORRECT_NUMERICAL, stage=Stage.CORRECTNESS,
               message=f"matched ratio 0.{90 + i % 9} under the required 0.99")]
    stages = [
        StageResult(stage=Stage.STATIC, status="passed", duration_s=0.4,
                    details={"findings": []}),
        StageResult(stage=Stage.CORRECTNESS, status="failed" if reasons else "passed",
                    duration_s=1.5 + (i % 7) / 10, reasons=list(reasons),
                    details={"trials": 5, "trial_seeds": [i * 10 + k for k in range(5)]}),
        StageResult(stage=Stage.BENCHMARK, status="skipped" if reasons else "passed",
                    duration_s=0.0 if reasons else 3.25,
                    details={"median_ms": 0.42, "speedup": 1.3} if not reasons else
                    {"reason": "correctness failed"}),
    ]
    cand_name = name or f"{definition}_candidate_{i}"
    return Verdict(
        decision=decision,  # type: ignore[arg-type]
        reasons=reasons,
        stages=stages,
        candidate=Candidate(name=cand_name, sha256=_tag(f"candidate-{i}-{cand_name}"),
                            author=author, language="triton", definition=definition),
        definition=Subject(name=definition, sha256=_tag(f"definition-{definition}")),
        policy=Subject(name="default", sha256=_tag("policy-default")),
        seed=1_000_003 * i + 17,
        environment=Environment(harness_version="0.1.0", python="3.11.9", torch="2.13.0",
                                triton="3.4.0", platform="Linux-x86_64", device="NVIDIA H200",
                                backend="process", isolation=["netns", "seccomp", "rlimits"]),
        started_at=started_at,
        finished_at=started_at,
    )
