"""The stage interface: what every stage is given, what it may ask for, what it returns.

A stage is an object with a ``stage`` (its name in the verdict), the resource it ``needs``
(so that a scheduler can place it) and ``run(ctx, so_far) -> StageResult``. ``ctx`` is
frozen: the evaluation's inputs. ``so_far`` is the evaluation's record: the results so far
and the artifacts stages share (the static report, the sandboxed execution, ``job.execution``),
each computed once, by the first stage that asks for it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..models import Definition, Policy, Solution, Stage, StageResult, WorkloadTrace
from ..sandbox.interface import Sandbox
from .lanes import NO_LANE, GpuLane

GPU_LANGUAGES = frozenset({"cuda", "cpp", "tilelang"})


class Needs(enum.Enum):
    """What a stage occupies while it runs."""

    CPU = "cpu"
    GPU = "gpu"  # a GPU, shareable with other stages
    EXCLUSIVE_GPU = "exclusive-gpu"  # a GPU to itself: timing


@dataclass(frozen=True)
class EvaluationContext:
    """One candidate's evaluation: everything a stage reads, nothing it may change."""

    definition: Definition
    solution: Solution
    workloads: tuple[WorkloadTrace, ...]
    policy: Policy
    sandbox: Sandbox
    seed: int
    device: str  # "cuda" or "cpu"
    root: Path  # the private job directory of this evaluation
    blob_root: Path | None = None
    lane: GpuLane = NO_LANE
    """The GPU this evaluation's jobs use and share (``stages.lanes``)."""
    static_report: Any = None
    """This solution's static analysis when a scheduler made it in a batch (a
    ``static.StaticReport``); None: the static stage runs the analysers itself."""
    reference_timings: Any = None
    """A run's ``stages.reftimes.ReferenceTimings``: the reference timed once for all of a
    definition's candidates; None: this evaluation times it."""

    @property
    def language(self) -> str:
        return self.solution.spec.language.value

    @property
    def on_gpu(self) -> bool:
        return self.device != "cpu"


# why a later stage does not run, by the first stage that failed before it
_BLOCKED = {Stage.POLICY: "not run: an earlier stage rejected the candidate",
            Stage.STATIC: "not run: an earlier stage rejected the candidate",
            Stage.COMPILE: "not run: the candidate did not compile",
            Stage.CORRECTNESS: "not run: the candidate is not correct"}


@dataclass
class SoFar:
    """The evaluation's record as it grows."""

    results: list[StageResult] = field(default_factory=list)
    _shared: dict[str, Any] = field(default_factory=dict)

    def first_failed(self) -> StageResult | None:
        return next((r for r in self.results if r.status == "failed"), None)

    def blocked(self) -> str | None:
        """Why the next stage must not run (None: it may)."""
        failed = self.first_failed()
        return None if failed is None else _BLOCKED.get(failed.stage,
                                                        "not run: an earlier stage failed")

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """The artifact ``key``, made by ``make`` the first time it is asked for."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]


class StageRunner(Protocol):
    stage: Stage
    needs: Needs

    def run(self, ctx: EvaluationContext, so_far: SoFar) -> StageResult: ...


def skipped(stage: Stage, why: str) -> StageResult:
    return StageResult(stage=stage, status="skipped", duration_s=0.0, details={"reason": why})
