"""The verdict: decision, stable reason codes and per-stage results."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints, model_validator

from ._base import FrozenModel


class Stage(StrEnum):
    INTAKE = "intake"
    STATIC = "static"
    POLICY = "policy"
    COMPILE = "compile"
    CORRECTNESS = "correctness"
    SANITIZER = "sanitizer"
    BENCHMARK = "benchmark"
    PROFILE = "profile"
    PROMOTION = "promotion"


class ReasonCode(StrEnum):
    """Stable codes: documented in the README, never renamed, only added."""

    # static + policy
    STATIC_FINDING = "STATIC_FINDING"
    """A blocking static-analysis finding (rule id in the message)."""
    POLICY_LANGUAGE = "POLICY_LANGUAGE"
    """The solution's language is not allowed by the policy."""
    POLICY_IMPORT = "POLICY_IMPORT"
    """An import the policy denies, or one outside its allow list."""
    POLICY_SOURCE_SIZE = "POLICY_SOURCE_SIZE"
    """Sources larger or more numerous than the policy allows."""
    POLICY_BASELINE_CALL = "POLICY_BASELINE_CALL"
    """The candidate calls the library it is meant to be compared against."""
    # compile
    COMPILE_ERROR = "COMPILE_ERROR"
    """Import / build of the candidate failed, or its entry point is missing."""
    COMPILE_TIMEOUT = "COMPILE_TIMEOUT"
    """Import / build ran past the policy's compile time limit."""
    # run time
    RUNTIME_ERROR = "RUNTIME_ERROR"
    """The candidate raised while being called."""
    TIMEOUT = "TIMEOUT"
    """The candidate's process ran past the wall-clock limit and was killed."""
    RESOURCE_LIMIT = "RESOURCE_LIMIT"
    """Killed by a memory, process, file or CPU limit."""
    WORKER_PROTOCOL = "WORKER_PROTOCOL"
    """The worker died, exited early or answered out of protocol."""
    INTEGRITY_VIOLATION = "INTEGRITY_VIOLATION"
    """Timers, comparison functions or the worker itself were tampered with at run time."""
    # correctness
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    """An output's shape differs from the definition's for that workload."""
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    """An output's dtype differs from the definition's."""
    INCORRECT_TYPE = "INCORRECT_TYPE"
    """An output is not exactly ``torch.Tensor`` (e.g. a lazy subclass) or is missing."""
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    """Matched ratio under the policy's requirement (atol AND rtol exceeded)."""
    NONFINITE_OUTPUT = "NONFINITE_OUTPUT"
    """NaN/Inf where the reference is finite (also: outputs left unwritten)."""
    INPUT_MUTATED = "INPUT_MUTATED"
    """An input tensor changed during the call."""
    LANGUAGE_NOT_USED = "LANGUAGE_NOT_USED"
    """A call launched no kernel of the solution's declared language (e.g. a ``triton``
    solution whose work is done by torch ops)."""
    # benchmark
    TIMING_INCONSISTENT = "TIMING_INCONSISTENT"
    """Reported timings disagree with the trusted side's own clock."""
    BENCH_OUTPUT_MISMATCH = "BENCH_OUTPUT_MISMATCH"
    """Outputs of randomly chosen timed calls were wrong (e.g. cached replay)."""
    SLOWER_THAN_BASELINE = "SLOWER_THAN_BASELINE"
    """Speedup under the policy's minimum."""
    TIMING_UNSTABLE = "TIMING_UNSTABLE"
    """Dispersion over the policy's maximum."""
    IMPLAUSIBLE_SPEED = "IMPLAUSIBLE_SPEED"
    """Measured time below the workload's speed-of-light bound (bytes that must move over the
    measured copy bandwidth): physically impossible, so not a real measurement."""
    # sanitizer
    SANITIZER_MEMCHECK = "SANITIZER_MEMCHECK"
    """compute-sanitizer memcheck: out-of-bounds or misaligned access, leak, bad free."""
    SANITIZER_RACECHECK = "SANITIZER_RACECHECK"
    """compute-sanitizer racecheck: shared-memory data race."""
    SANITIZER_INITCHECK = "SANITIZER_INITCHECK"
    """compute-sanitizer initcheck: read of uninitialised device memory."""
    SANITIZER_SYNCCHECK = "SANITIZER_SYNCCHECK"
    """compute-sanitizer synccheck: invalid synchronisation (e.g. divergent barrier)."""
    # promotion
    STAGE_NOT_RUN = "STAGE_NOT_RUN"
    """A stage the policy requires was skipped."""


StageStatus = Literal["passed", "failed", "skipped"]


class Reason(FrozenModel):
    code: ReasonCode
    stage: Stage
    message: str


class StageResult(FrozenModel):
    stage: Stage
    status: StageStatus
    duration_s: float = Field(ge=0.0)
    reasons: list[Reason] = Field(default_factory=list)
    """Why the stage failed (empty unless ``status == 'failed'``)."""
    details: dict[str, Any] = Field(default_factory=dict)
    """Stage-specific measurements (findings, errors, timings, skip reason)."""

    @model_validator(mode="after")
    def _consistent(self) -> StageResult:
        if (self.status == "failed") != bool(self.reasons):
            raise ValueError("a stage has reasons if and only if it failed")
        return self


class Subject(FrozenModel):
    name: str
    sha256: str
    """``sha256:<hex>`` over the canonical JSON of the document."""


class Candidate(Subject):
    author: str
    language: str
    definition: str


class Environment(FrozenModel):
    harness_version: str
    python: str
    torch: str
    triton: str | None
    platform: str
    device: str
    """``cpu`` or the GPU's name."""
    backend: str
    """Sandbox backend that ran the candidate."""
    isolation: list[str] = Field(default_factory=list)
    """Isolation layers that were actually in force (e.g. ``netns``, ``seccomp``)."""
    warnings: list[str] = Field(default_factory=list)
    """Degradations the backend recorded (e.g. cgroups unavailable)."""
    extra: dict[str, str] = Field(default_factory=dict)


MAX_ARTIFACTS = 4096
"""Artifacts one verdict may name (sources are capped at 1,024 by intake)."""


def _artifact_name(v: str) -> str:
    """A relative path with plain components: ``archive export`` writes it under a folder."""
    parts = v.split("/")
    if not v.isprintable() or "\\" in v or any(p in ("", ".", "..") or p.startswith(".")
                                                for p in parts):
        raise ValueError("artifact names are relative paths of plain components")
    return v


ArtifactName = Annotated[str, StringConstraints(min_length=1, max_length=1100),
                         AfterValidator(_artifact_name)]
ArtifactHash = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]


class Verdict(FrozenModel):
    schema_version: Literal[1] = 1
    decision: Literal["promote", "reject"]
    reasons: list[Reason]
    stages: list[StageResult]
    candidate: Candidate
    definition: Subject
    policy: Subject
    seed: int = Field(ge=0, le=2**53 - 1)
    """Root seed; every trial's seed is derived from it and listed in the correctness stage."""
    environment: Environment
    started_at: str
    finished_at: str
    artifacts: dict[ArtifactName, ArtifactHash] = Field(default_factory=dict,
                                                        max_length=MAX_ARTIFACTS)
    """What the evaluation consumed and produced, archived by content (``sandboxharness.archive``):
    name (``sources/k.py``, ``logs/compiler.log``...) -> ``sha256:<hex>``. Empty when nothing was
    archived (and in verdicts written before the archive existed)."""

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        if (self.decision == "reject") != bool(self.reasons):
            raise ValueError("a verdict is rejected if and only if it carries reasons")
        return self

    def stage(self, stage: Stage) -> StageResult | None:
        return next((s for s in self.stages if s.stage == stage), None)
