"""FlashInfer-Bench ``Definition``: the operator's axes, tensors and reference."""

from __future__ import annotations

import ast
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ._base import FrozenModel

DType = Literal[
    "float64", "float32", "float16", "bfloat16",
    "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
    "int64", "int32", "int16", "int8", "uint8", "bool",
]


class ConstAxis(FrozenModel):
    type: Literal["const"]
    value: int = Field(ge=0)
    """Fixed extent of this axis."""
    description: str | None = None


class VarAxis(FrozenModel):
    type: Literal["var"]
    """Extent chosen per workload."""
    description: str | None = None


Axis = Annotated[ConstAxis | VarAxis, Field(discriminator="type")]


class TensorSpec(FrozenModel):
    shape: list[str] | None
    """Axis names, outermost first; ``None`` marks a scalar argument."""
    dtype: DType
    optional: bool = False
    """An optional input may be passed as ``None``."""
    description: str | None = None


class Definition(FrozenModel):
    name: str = Field(min_length=1)
    """Unique name; solutions and workloads refer to it."""
    op_type: str = Field(min_length=1)
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    """Named inputs in call order."""
    outputs: dict[str, TensorSpec]
    """Named outputs in return (or destination-argument) order."""
    reference: str
    """Python source with a top-level ``run`` taking the inputs, returning the outputs."""
    tags: list[str] = Field(default_factory=list)
    """Free-form ``key:value`` tags; ``fi_api:<dotted.name>`` names a FlashInfer baseline."""
    description: str | None = None
    constraints: list[str] | None = None
    """Python expressions over axis names that every workload must satisfy."""

    @model_validator(mode="after")
    def _check(self) -> Definition:
        for where, specs in (("inputs", self.inputs), ("outputs", self.outputs)):
            for tname, spec in specs.items():
                for ax in spec.shape or []:
                    if ax not in self.axes:
                        raise ValueError(f"{where}.{tname}.shape names unknown axis {ax!r}")
        if not self.outputs:
            raise ValueError("outputs: at least one output is required")
        clash = set(self.inputs) & set(self.outputs)
        if clash:
            raise ValueError(f"names used as both input and output: {sorted(clash)}")
        try:
            tree = ast.parse(self.reference)
        except SyntaxError as exc:
            raise ValueError(f"reference: not valid Python (line {exc.lineno}): {exc.msg}") from None
        if not any(
            isinstance(node, ast.FunctionDef) and node.name == "run" for node in tree.body
        ):
            raise ValueError("reference: no top-level function 'run'")
        return self

    @property
    def var_axes(self) -> list[str]:
        return [n for n, a in self.axes.items() if isinstance(a, VarAxis)]

    @property
    def fi_api(self) -> str | None:
        """The FlashInfer function this operator corresponds to, from an ``fi_api:`` tag."""
        for tag in self.tags:
            if tag.startswith("fi_api:"):
                return tag.split(":", 1)[1]
        return None

    def resolve_shape(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...] | None:
        """Concrete shape of ``spec`` given the workload's var-axis values."""
        if spec.shape is None:
            return None
        dims = []
        for ax in spec.shape:
            axis = self.axes[ax]
            dims.append(axis.value if isinstance(axis, ConstAxis) else axes[ax])
        return tuple(dims)
