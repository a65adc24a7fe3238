"""FlashInfer-Bench workloads: concrete var-axis values and how each input is made."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ._base import FrozenModel


class RandomInput(FrozenModel):
    type: Literal["random"]
    """Filled from the harness's seeded generator."""


class ScalarInput(FrozenModel):
    type: Literal["scalar"]
    value: int | float | bool
    """Passed to the kernel as a Python scalar."""


class SafetensorsInput(FrozenModel):
    type: Literal["safetensors"]
    path: str
    """Blob path, relative to the dataset root (the workload file's ``..`` by convention)."""
    tensor_key: str
    """Key of the tensor inside the blob."""

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        p = PurePosixPath(v)
        if p.is_absolute() or ".." in p.parts:
            raise ValueError(f"safetensors path must be relative without '..': {v!r}")
        return v


InputSpec = Annotated[RandomInput | ScalarInput | SafetensorsInput, Field(discriminator="type")]


class Workload(FrozenModel):
    uuid: str = Field(min_length=1)
    axes: dict[str, int]
    """Values of the definition's var axes."""
    inputs: dict[str, InputSpec]


class WorkloadTrace(FrozenModel):
    """One line of a workloads ``.jsonl`` file (a Trace with no solution or evaluation)."""

    definition: str
    workload: Workload
    solution: str | None = None
    evaluation: dict[str, Any] | None = None
