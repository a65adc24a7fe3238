"""FlashInfer-Bench workloads: concrete var-axis values and how each input is made."""

from __future__ import annotations

import math
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, field_validator

from ._base import MAX_ITEMS, FiniteModel, FrozenModel, Identifier, Label, Name
from .definition import MAX_AXIS_VALUE

MAX_SCALAR_INT = 2**63 - 1
"""Scalars become a C ``int64_t`` at the latest; the definition's dtype may narrow the range
(``intake.check_pairing``)."""

AxisValue = Annotated[int, Field(ge=0, le=MAX_AXIS_VALUE, strict=True)]


class RandomInput(FrozenModel):
    type: Literal["random"]
    """Filled from the harness's seeded generator."""


class ScalarInput(FiniteModel):
    type: Literal["scalar"]
    value: int | float | bool
    """Passed to the kernel as a Python scalar: finite, and an integer within int64."""

    @field_validator("value")
    @classmethod
    def _in_range(cls, v: int | float | bool) -> int | float | bool:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("must be a finite number")
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_SCALAR_INT:
            raise ValueError(f"integer outside int64 (|value| > {MAX_SCALAR_INT})")
        return v


class SafetensorsInput(FrozenModel):
    type: Literal["safetensors"]
    path: str = Field(min_length=1, max_length=1024)
    """Blob path, relative to the dataset root (the workload file's ``..`` by convention)."""
    tensor_key: Label
    """Key of the tensor inside the blob."""

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        p = PurePosixPath(v)
        if p.is_absolute() or ".." in p.parts:
            raise ValueError(f"safetensors path must be relative without '..': {v!r}")
        if not v.isprintable():
            raise ValueError("safetensors path must not contain control characters")
        return v


InputSpec = Annotated[RandomInput | ScalarInput | SafetensorsInput, Field(discriminator="type")]


class Workload(FrozenModel):
    uuid: Label
    axes: dict[Identifier, AxisValue] = Field(max_length=64)
    """Values of the definition's var axes (each in [0, 2**31 - 1])."""
    inputs: dict[Identifier, InputSpec] = Field(max_length=MAX_ITEMS)


class WorkloadTrace(FrozenModel):
    """One line of a workloads ``.jsonl`` file (a Trace with no solution or evaluation)."""

    definition: Name
    workload: Workload
    solution: Annotated[str, StringConstraints(max_length=256)] | None = None
    evaluation: dict[str, Any] | None = None
    """Kept as given (its nesting and size are capped by ``intake``)."""
