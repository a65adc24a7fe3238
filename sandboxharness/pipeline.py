"""Harness: orders the stages and turns their results into a verdict. No I/O of its own
beyond a private job directory; progress goes to an observer."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import baselines, jobs
from ._internal import environment
from .errors import InfrastructureError
from .models import (
    Candidate,
    Definition,
    Environment,
    Policy,
    Reason,
    ReasonCode,
    Solution,
    Stage,
    StageResult,
    Subject,
    Verdict,
    WorkloadTrace,
)
from .sandbox import select_backend
from .sandbox.interface import Sandbox
from .stages import benchmark, compile_cuda, correctness, honesty, precheck, sanitizer
from .stages.cases import build_cases

Observer = Callable[[StageResult], None]
GPU_LANGUAGES = {"cuda", "cpp", "tilelang"}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _skipped(stage: Stage, why: str) -> StageResult:
    return StageResult(stage=stage, status="skipped", duration_s=0.0, details={"reason": why})


def _result(stage: Stage, reasons: list[Reason], started: float, details: dict[str, Any]) -> StageResult:
    return StageResult(stage=stage, status="failed" if reasons else "passed",
                       duration_s=time.monotonic() - started, reasons=reasons, details=details)


class Harness:
    """Evaluate candidates under one policy. Thread-compatible, not thread-safe."""

    def __init__(self, policy: Policy, *, sandbox: Sandbox | None = None,
                 observer: Observer | None = None, workdir: Path | None = None,
                 keep_jobs: bool = False) -> None:
        self.policy = policy
        self.sandbox = sandbox or select_backend(policy.sandbox.backend, policy)
        self.observer = observer or (lambda _r: None)
        self.workdir = workdir
        self.keep_jobs = keep_jobs

    def evaluate(self, definition: Definition, solution: Solution,
                 workloads: list[WorkloadTrace], *, seed: int | None = None,
                 blob_root: Path | None = None) -> Verdict:
        started_at = _now()
        seed = secrets.randbits(53) if seed is None else seed  # exact in RFC 8785 JSON
        device = "cuda" if environment.device_name() != "cpu" else "cpu"
        if solution.spec.language.value in GPU_LANGUAGES and device == "cpu":
            raise InfrastructureError(f"{solution.spec.language.value} solutions need a CUDA "
                                      "device; this machine has none")
        stages: list[StageResult] = []

        def emit(result: StageResult) -> None:
            stages.append(result)
            self.observer(result)

        root = Path(tempfile.mkdtemp(prefix="shx-job-", dir=self.workdir))
        try:
            for result in precheck.run(definition, solution, self.policy, root / "static"):
                emit(result)
            if any(s.status == "failed" for s in stages):
                for st in (Stage.COMPILE, Stage.CORRECTNESS, Stage.SANITIZER, Stage.BENCHMARK):
                    emit(_skipped(st, "not run: an earlier stage rejected the candidate"))
            else:
                self._dynamic(definition, solution, workloads, seed, device, root,
                              blob_root, emit)
        finally:
            if not self.keep_jobs:
                shutil.rmtree(root, ignore_errors=True)
        emit(self._promotion(stages))
        reasons = [r for s in stages for r in s.reasons]
        env = environment.describe()
        return Verdict(
            decision="reject" if reasons else "promote", reasons=reasons, stages=stages,
            candidate=Candidate(name=solution.name, sha256=solution.content_hash(),
                                author=solution.author, language=solution.spec.language.value,
                                definition=solution.definition),
            definition=Subject(name=definition.name, sha256=definition.content_hash()),
            policy=Subject(name=self.policy.name, sha256=self.policy.content_hash()),
            seed=seed,
            environment=Environment(
                harness_version=str(env["harness_version"]), python=str(env["python"]),
                torch=str(env["torch"]), triton=env["triton"], platform=str(env["platform"]),
                device=str(env["device"]), backend=self.sandbox.name,
                isolation=self.sandbox.isolation(), warnings=self.sandbox.warnings(),
                extra={k: str(v) for k, v in self.sandbox.describe().items()}),
            started_at=started_at, finished_at=_now(),
        )

    def _dynamic(self, definition: Definition, solution: Solution,
                 workloads: list[WorkloadTrace], seed: int, device: str, root: Path,
                 blob_root: Path | None, emit: Observer) -> None:
        data_dir = jobs.stage_blobs(workloads, blob_root, root / "data")
        cases = build_cases(definition, workloads, self.policy, seed=seed)
        t0 = time.monotonic()
        cand, ref, plan = jobs.run_both(self.sandbox, definition, solution, cases, self.policy,
                                        seed, device, root, data_dir)
        compile_details = {"import_s": cand.import_s, "wall_s": cand.wall_s.get("compile"),
                           "log_tail": (cand.exit.stderr[-2000:] if cand.exit else "")}
        if device != "cpu" and solution.spec.language.value in GPU_LANGUAGES:  # GPU: nvcc log
            compile_details.update(compile_cuda.summarize(root / "candidate" / "out",
                                                          solution.content_hash()))
        if cand.fault is not None and cand.fault_phase == "compile":
            emit(_result(Stage.COMPILE, [Reason(code=cand.fault.code, stage=Stage.COMPILE,
                                                message=cand.fault.message)], t0, compile_details))
            for st in (Stage.CORRECTNESS, Stage.SANITIZER, Stage.BENCHMARK):
                emit(_skipped(st, "not run: the candidate did not compile"))
            return
        emit(StageResult(stage=Stage.COMPILE, status="passed",
                         duration_s=cand.wall_s.get("compile", 0.0), details=compile_details))
        t1 = time.monotonic()
        cand_dir, ref_dir = root / "candidate" / "out", root / "reference" / "out"
        if ref is None or cand.fault is not None and cand.fault_phase == "correctness":
            # the candidate's process died or misbehaved before it finished its calls
            fault = cand.fault
            reasons = [Reason(code=fault.code if fault else ReasonCode.WORKER_PROTOCOL,
                              stage=Stage.CORRECTNESS,
                              message=fault.message if fault else "no results")]
            details: dict[str, Any] = {"log_tail": cand.exit.stderr[-2000:] if cand.exit else ""}
        else:
            reasons, details = correctness.judge(definition, self.policy, cand, ref, cand_dir,
                                                 ref_dir, str(data_dir))
            if not reasons:  # every call held to what it returned, in the declared language
                reasons = honesty.rebound(cand) or honesty.launches(
                    solution.spec.language.value, cand)
        details["root_seed"] = seed
        details["coverage_notes"] = cases.notes  # where held-out coverage was reduced
        emit(StageResult(stage=Stage.CORRECTNESS, status="failed" if reasons else "passed",
                         duration_s=cand.wall_s.get("correctness", 0.0) + time.monotonic() - t1,
                         reasons=reasons, details=details))
        if device == "cpu":
            emit(_skipped(Stage.SANITIZER, "no CUDA device: compute-sanitizer needs a GPU"))
        elif reasons or ref is None:
            emit(_skipped(Stage.SANITIZER, "not run: the candidate is not correct"))
        else:  # GPU: compute-sanitizer, one sandboxed job per tool
            emit(sanitizer.run(self.sandbox, definition, solution, cases, self.policy, seed,
                               root, data_dir, jobs.candidate_hello(solution),
                               root / "candidate" / "out"))
        if reasons or ref is None:
            emit(_skipped(Stage.BENCHMARK, "not run: the candidate is not correct"))
            return
        t2 = time.monotonic()
        b_reasons, b_details = benchmark.judge(definition, self.policy, cand, ref, cand_dir,
                                               ref_dir, str(data_dir), device,
                                               solution.spec.language.value,
                                               honesty.own_kernels(solution))
        if cand.fault is not None and cand.fault_phase == "benchmark":
            b_reasons.insert(0, Reason(code=cand.fault.code, stage=Stage.BENCHMARK,
                                       message=cand.fault.message))
        if device != "cpu" and cand.benches:  # GPU: baselines, promotion gate, roofline
            g_reasons, g_details = baselines.extend_benchmark(
                self.sandbox, definition, self.policy, cand, ref, plan, root, data_dir)
            b_reasons.extend(g_reasons)
            b_details.update(g_details)
        emit(StageResult(stage=Stage.BENCHMARK, status="failed" if b_reasons else "passed",
                         duration_s=cand.wall_s.get("benchmark", 0.0) + time.monotonic() - t2,
                         reasons=b_reasons, details=b_details))

    def _promotion(self, stages: list[StageResult]) -> StageResult:
        t0 = time.monotonic()
        if any(s.status == "failed" for s in stages):
            return StageResult(stage=Stage.PROMOTION, status="skipped", duration_s=0.0,
                               details={"reason": "an earlier stage rejected the candidate"})
        reasons = []
        by_stage = {s.stage.value: s for s in stages}
        for name in self.policy.required_stages:
            st = by_stage.get(name)
            if st is None or st.status != "passed":
                why = st.details.get("reason", "not run") if st else "not run"
                reasons.append(Reason(code=ReasonCode.STAGE_NOT_RUN, stage=Stage.PROMOTION,
                                      message=f"required stage {name!r} did not pass: {why}"))
        return _result(Stage.PROMOTION, reasons, t0, {"required": self.policy.required_stages})
