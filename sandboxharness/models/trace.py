"""FlashInfer-Bench ``Trace`` export of a verdict."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ._base import FrozenModel
from .workload import Workload

EvaluationStatus = Literal[
    "PASSED", "INCORRECT_SHAPE", "INCORRECT_NUMERICAL", "INCORRECT_DTYPE",
    "RUNTIME_ERROR", "COMPILE_ERROR", "TIMEOUT",
]


class Correctness(FrozenModel):
    max_relative_error: float = 0.0
    max_absolute_error: float = 0.0
    extra: dict[str, Any] | None = None


class Performance(FrozenModel):
    latency_ms: float = Field(default=0.0, ge=0)
    reference_latency_ms: float = Field(default=0.0, ge=0)
    speedup_factor: float = Field(default=0.0, ge=0)


class TraceEnvironment(FrozenModel):
    hardware: str = Field(min_length=1)
    libs: dict[str, str] = Field(default_factory=dict)


class Evaluation(FrozenModel):
    status: EvaluationStatus
    environment: TraceEnvironment
    timestamp: str
    log: str = ""
    correctness: Correctness | None = None
    performance: Performance | None = None

    @model_validator(mode="after")
    def _status_matches_metrics(self) -> Evaluation:
        """FlashInfer-Bench's rule: PASSED has both, INCORRECT_NUMERICAL only correctness."""
        want_corr = self.status in ("PASSED", "INCORRECT_NUMERICAL")
        want_perf = self.status == "PASSED"
        if (self.correctness is not None) != want_corr or (
                self.performance is not None) != want_perf:
            raise ValueError(f"status {self.status} does not match the metrics present")
        return self


class Trace(FrozenModel):
    definition: str
    workload: Workload
    solution: str | None = None
    evaluation: Evaluation | None = None
