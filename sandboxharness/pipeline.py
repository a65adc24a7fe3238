"""Harness: orders the stages and turns their results into a verdict. No I/O of its own
beyond a private job directory; progress goes to an observer."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ._internal import host
from .archive import Archive, collect, put_verdict
from .errors import InfrastructureError
from .models import (
    Candidate,
    Definition,
    Environment,
    Policy,
    Solution,
    StageResult,
    Subject,
    Verdict,
    WorkloadTrace,
)
from .policy import decide
from .sandbox import select_backend
from .sandbox.interface import Sandbox
from .stages.benchmark import BenchmarkStage
from .stages.compile import CompileStage
from .stages.context import GPU_LANGUAGES, EvaluationContext, SoFar, StageRunner
from .stages.correctness import CorrectnessStage
from .stages.lanes import NO_LANE, GpuLane
from .stages.profile import ProfileStage
from .stages.sanitizer import SanitizerStage
from .stages.sources import PolicyStage, StaticStage

Observer = Callable[[StageResult], None]
STAGES: tuple[StageRunner, ...] = (PolicyStage(), StaticStage(), CompileStage(),
                                   CorrectnessStage(), SanitizerStage(), BenchmarkStage(),
                                   ProfileStage())
"""In order; each stage skips itself (with the reason) when an earlier one failed."""


def _extra(sandbox: Sandbox, device: str) -> dict[str, str]:
    """The backend's own description, and on a GPU the driver every number is tied to."""
    extra = {k: str(v) for k, v in sandbox.describe().items()}
    if device == "cuda":
        from .stages.hwstate import driver_version

        driver = driver_version()
        if driver:
            extra["driver"] = driver
    return extra


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Harness:
    """Evaluate candidates under one policy. Thread-compatible, not thread-safe."""

    def __init__(self, policy: Policy, *, sandbox: Sandbox | None = None,
                 observer: Observer | None = None, workdir: Path | None = None,
                 keep_jobs: bool = False, archive: Archive | None = None) -> None:
        """``archive``: where every evaluation's artifacts and verdict go (none: not kept)."""
        self.policy = policy
        self.archive = archive
        self.sandbox = sandbox or select_backend(policy.sandbox.backend, policy)
        self.observer = observer or (lambda _r: None)
        self.workdir = workdir
        self.keep_jobs = keep_jobs

    def evaluate(self, definition: Definition, solution: Solution,
                 workloads: list[WorkloadTrace], *, seed: int | None = None,
                 blob_root: Path | None = None, lane: GpuLane = NO_LANE,
                 static_report: object = None, reference_timings: object = None) -> Verdict:
        """``lane``: the GPU this evaluation uses and shares with others (a dataset run);
        ``static_report``: its static analysis, made in a batch with others;
        ``reference_timings``: the run's reference timings (``stages.reftimes``)."""
        started_at = _now()
        seed = secrets.randbits(53) if seed is None else seed  # exact in RFC 8785 JSON
        device = "cuda" if host.device_name() != "cpu" else "cpu"
        if solution.spec.language.value in GPU_LANGUAGES and device == "cpu":
            raise InfrastructureError(f"{solution.spec.language.value} solutions need a CUDA "
                                      "device; this machine has none")
        so_far = SoFar()
        root = Path(tempfile.mkdtemp(prefix="shx-job-", dir=self.workdir))
        ctx = EvaluationContext(definition=definition, solution=solution,
                                workloads=tuple(workloads), policy=self.policy,
                                sandbox=self.sandbox, seed=seed, device=device, root=root,
                                blob_root=blob_root, lane=lane, static_report=static_report,
                                reference_timings=reference_timings)
        try:
            for stage in STAGES:
                result = stage.run(ctx, so_far)
                so_far.results.append(result)
                self.observer(result)
        finally:
            if not self.keep_jobs:
                shutil.rmtree(root, ignore_errors=True)
        stages = so_far.results
        promotion = decide(stages, self.policy)
        stages.append(promotion)
        self.observer(promotion)
        reasons = [r for s in stages for r in s.reasons]
        env = host.describe()
        artifacts: dict[str, str] = {}
        if self.archive is not None:  # the trusted side's copies, archived whole
            artifacts = collect.store(self.archive, {
                **collect.input_artifacts(definition, solution, workloads, self.policy),
                **collect.published(so_far)})
        verdict = Verdict(
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
                extra=_extra(self.sandbox, device)),
            started_at=started_at, finished_at=_now(), artifacts=artifacts,
        )
        if self.archive is not None:
            put_verdict(self.archive, verdict)
        return verdict
