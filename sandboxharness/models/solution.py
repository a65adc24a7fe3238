"""FlashInfer-Bench ``Solution``: a candidate's build spec and its sources."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, field_validator, model_validator

from ._base import MAX_ITEMS, FrozenModel, Label, Name, Text

MAX_PATH_BYTES = 1024
MAX_COMPONENT_BYTES = 255
"""Linux's NAME_MAX: a longer component cannot be written into the job directory."""
MAX_SOURCES = 1024
"""Hard cap on files per solution (the policy's ``max_sources`` is usually far lower)."""


class Language(StrEnum):
    PYTHON = "python"
    TRITON = "triton"
    CUDA = "cuda"
    CPP = "cpp"
    TILELANG = "tilelang"


class Binding(StrEnum):
    TORCH = "torch"
    TVM_FFI = "tvm-ffi"


def check_source_path(v: str) -> str:
    """A source path in its one normal form: relative POSIX, components separated by single
    slashes, none empty, ``.``, ``..`` or hidden, printable, within Linux's name limits. So two
    spellings of one file (``./a.py``, ``a.py``, ``a.py/``) cannot both appear."""
    if not v.isprintable():
        raise ValueError("source path must not contain NUL or control characters")
    if v.startswith(("/", "~")):
        raise ValueError(f"source path must be relative: {v!r}")
    if "\\" in v:
        raise ValueError(f"source path must not contain '\\': {v!r}")
    if len(v.encode()) > MAX_PATH_BYTES:
        raise ValueError(f"source path longer than {MAX_PATH_BYTES} bytes")
    parts = v.split("/")
    if any(part in ("", ".") for part in parts):
        raise ValueError(f"source path must be normalised (no empty or '.' components, no "
                         f"trailing '/'): {v!r}")
    if ".." in parts:
        raise ValueError(f"source path must not contain '..': {v!r}")
    if any(part.startswith(".") for part in parts):
        raise ValueError(f"source path must not name hidden files: {v!r}")
    if any(len(part.encode()) > MAX_COMPONENT_BYTES for part in parts):
        raise ValueError(f"source path component longer than {MAX_COMPONENT_BYTES} bytes")
    return v


class SourceFile(FrozenModel):
    path: str = Field(min_length=1)
    """Relative POSIX path inside the solution, in normal form (see ``check_source_path``)."""
    content: str

    @field_validator("path")
    @classmethod
    def _safe_path(cls, v: str) -> str:
        return check_source_path(v)


class BuildSpec(FrozenModel):
    language: Language
    target_hardware: list[Label] = Field(min_length=1, max_length=64)
    entry_point: str = Field(max_length=MAX_PATH_BYTES + 2 + 256)
    """``<file>::<function>``; the function is an identifier."""
    dependencies: list[Label] = Field(default_factory=list, max_length=MAX_ITEMS)
    destination_passing_style: bool = True
    """True: outputs are pre-allocated and passed after the inputs; False: returned."""
    binding: Binding | None = None
    """For C++/CUDA: how the entry point is exposed to Python."""

    @field_validator("entry_point")
    @classmethod
    def _entry(cls, v: str) -> str:
        if v.count("::") != 1 or not all(v.split("::")):
            raise ValueError(f"entry_point must be '<file>::<function>', got {v!r}")
        if not v.split("::")[1].isidentifier():
            raise ValueError(f"entry_point's function must be an identifier, got {v!r}")
        return v

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::")[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.split("::")[1]


class Solution(FrozenModel):
    name: Name
    definition: Name
    author: Label
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1, max_length=MAX_SOURCES)
    description: Text = ""

    @model_validator(mode="after")
    def _check(self) -> Solution:
        seen: set[str] = set()
        for src in self.sources:
            if src.path in seen:
                raise ValueError(f"duplicate source path {src.path!r}")
            seen.add(src.path)
        dirs = {"/".join(p.split("/")[:i]) for p in seen for i in range(1, p.count("/") + 1)}
        clash = sorted(seen & dirs)
        if clash:
            raise ValueError(f"source path {clash[0]!r} is both a file and a directory")
        if self.spec.entry_file not in seen:
            raise ValueError(f"entry file {self.spec.entry_file!r} is not among the sources")
        return self

    def source(self, path: str) -> SourceFile:
        return next(s for s in self.sources if s.path == path)
