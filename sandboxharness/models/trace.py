"""FlashInfer-Bench ``Trace`` export of a verdict."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

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


class Trace(FrozenModel):
    definition: str
    workload: Workload
    solution: str | None = None
    evaluation: Evaluation | None = None
