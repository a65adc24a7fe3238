"""FlashInfer-Bench ``Definition``: the operator's axes, tensors and reference."""

from __future__ import annotations

import ast
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from ._base import MAX_ITEMS, FrozenModel, Identifier, Label, Name, Text

MAX_AXIS_VALUE = 2**31 - 1
"""Largest extent of an axis (const or per workload): torch indexes with 64 bits, but no
kernel of this harness's scope has a dimension past int32, and the total size of a workload
is capped separately (``intake.MAX_WORKLOAD_BYTES``)."""
MAX_DIMS = 16
MAX_REFERENCE_CHARS = 256 * 1024
"""The reference's source (FlashInfer-Bench's longest is ~8 KB)."""
MAX_REFERENCE_NODES = 100_000
MAX_REFERENCE_DEPTH = 100
"""Nesting of the reference's syntax tree: deeper trees crash Python's own compiler and every
recursive visitor (static analysis) with RecursionError (FlashInfer-Bench's deepest: ~16)."""
MAX_CONSTRAINT_CHARS = 1000
"""Same as ``stages.constraints.MAX_TEXT`` (which also bounds the evaluation)."""
ITEM_BYTES = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2,
              "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1,
              "float8_e5m2": 1, "float4_e2m1": 1}
"""Bytes per element (fp4 counted as a whole byte: an upper bound is what a cap needs)."""

DType = Literal[
    "float64", "float32", "float16", "bfloat16",
    "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
    "int64", "int32", "int16", "int8", "uint8", "bool",
]


class ConstAxis(FrozenModel):
    type: Literal["const"]
    value: int = Field(ge=0, le=MAX_AXIS_VALUE, strict=True)
    """Fixed extent of this axis."""
    description: Text | None = None


class VarAxis(FrozenModel):
    type: Literal["var"]
    """Extent chosen per workload."""
    description: Text | None = None


Axis = Annotated[ConstAxis | VarAxis, Field(discriminator="type")]


class TensorSpec(FrozenModel):
    shape: Annotated[list[Identifier], Field(max_length=MAX_DIMS)] | None
    """Axis names, outermost first; ``None`` marks a scalar argument."""
    dtype: DType
    optional: bool = False
    """An optional input may be passed as ``None``."""
    description: Text | None = None


Constraint = Annotated[str, StringConstraints(min_length=1, max_length=MAX_CONSTRAINT_CHARS)]


class Definition(FrozenModel):
    name: Name
    """Unique name; solutions and workloads refer to it (and files are named after it)."""
    op_type: Name
    axes: dict[Identifier, Axis] = Field(max_length=64)
    inputs: dict[Identifier, TensorSpec] = Field(max_length=MAX_ITEMS)
    """Named inputs in call order."""
    outputs: dict[Identifier, TensorSpec] = Field(max_length=MAX_ITEMS)
    """Named outputs in return (or destination-argument) order."""
    reference: str = Field(max_length=MAX_REFERENCE_CHARS)
    """Python source with a top-level ``run`` taking the inputs, returning the outputs."""
    tags: list[Label] = Field(default_factory=list, max_length=MAX_ITEMS)
    """Free-form ``key:value`` tags; ``fi_api:<dotted.name>`` names a FlashInfer baseline."""
    description: Text | None = None
    constraints: list[Constraint] | None = Field(default=None, max_length=MAX_ITEMS)
    """Python expressions over axis names that every workload must satisfy (parsed and
    bounded by ``stages.constraints`` when the document is loaded)."""

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
        tree = _parse_reference(self.reference)
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


def _parse_reference(source: str) -> ast.Module:
    """Parse the reference within bounds: a syntax tree too large or too deep is refused
    here, as a validation error, instead of crashing a later visitor or the compiler."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"reference: not valid Python (line {exc.lineno}): {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ValueError("reference: nested too deeply for Python's parser") from None
    except ValueError as exc:  # NUL bytes
        raise ValueError(f"reference: not valid Python: {exc}") from None
    count = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_REFERENCE_NODES:
            raise ValueError(f"reference: more than {MAX_REFERENCE_NODES} syntax nodes")
        if depth > MAX_REFERENCE_DEPTH:
            raise ValueError(f"reference: syntax nested deeper than {MAX_REFERENCE_DEPTH}")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree
