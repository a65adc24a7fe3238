"""FlashInfer-Bench ``Solution``: a candidate's build spec and its sources."""

from __future__ import annotations

from enum import StrEnum
from pathlib import PurePosixPath

from pydantic import Field, field_validator, model_validator

from ._base import FrozenModel


class Language(StrEnum):
    PYTHON = "python"
    TRITON = "triton"
    CUDA = "cuda"
    CPP = "cpp"
    TILELANG = "tilelang"


class Binding(StrEnum):
    TORCH = "torch"
    TVM_FFI = "tvm-ffi"


class SourceFile(FrozenModel):
    path: str = Field(min_length=1)
    """Relative POSIX path inside the solution; never absolute, never ``..``."""
    content: str

    @field_validator("path")
    @classmethod
    def _safe_path(cls, v: str) -> str:
        p = PurePosixPath(v)
        if p.is_absolute() or v.startswith("~"):
            raise ValueError(f"source path must be relative: {v!r}")
        if ".." in p.parts or "\\" in v or "\x00" in v:
            raise ValueError(f"source path must not contain '..', '\\' or NUL: {v!r}")
        if any(part.startswith(".") for part in p.parts):
            raise ValueError(f"source path must not name hidden files: {v!r}")
        return v


class BuildSpec(FrozenModel):
    language: Language
    target_hardware: list[str] = Field(min_length=1)
    entry_point: str
    """``<file>::<function>``."""
    dependencies: list[str] = Field(default_factory=list)
    destination_passing_style: bool = True
    """True: outputs are pre-allocated and passed after the inputs; False: returned."""
    binding: Binding | None = None
    """For C++/CUDA: how the entry point is exposed to Python."""

    @field_validator("entry_point")
    @classmethod
    def _entry(cls, v: str) -> str:
        if v.count("::") != 1 or not all(v.split("::")):
            raise ValueError(f"entry_point must be '<file>::<function>', got {v!r}")
        return v

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::")[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.split("::")[1]


class Solution(FrozenModel):
    name: str = Field(min_length=1)
    definition: str = Field(min_length=1)
    author: str = Field(min_length=1)
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: str = ""

    @model_validator(mode="after")
    def _check(self) -> Solution:
        seen: set[str] = set()
        for src in self.sources:
            if src.path in seen:
                raise ValueError(f"duplicate source path {src.path!r}")
            seen.add(src.path)
        if self.spec.entry_file not in seen:
            raise ValueError(f"entry file {self.spec.entry_file!r} is not among the sources")
        return self

    def source(self, path: str) -> SourceFile:
        return next(s for s in self.sources if s.path == path)
