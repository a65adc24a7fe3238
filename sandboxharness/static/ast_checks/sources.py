"""Which files are Python or C++/CUDA sources, and parsing Python the way the interpreter would."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import PurePosixPath
from typing import Literal

from ..interface import Finding
from .rules import finding

__all__ = ["CPP_SUFFIXES", "PYTHON_SUFFIXES", "SourceKind", "parse_python", "source_kind"]

SourceKind = Literal["python", "cpp", "other"]
PYTHON_SUFFIXES = frozenset({".py", ".pyw", ".pyi"})
CPP_SUFFIXES = frozenset({
    ".c", ".cc", ".cpp", ".cxx", ".c++", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".h++",
    ".inl", ".inc", ".ipp", ".tcc", ".tpp",
})


def source_kind(path: str) -> SourceKind:
    """``python``, ``cpp`` (C, C++ and CUDA) or ``other``, by suffix (case-insensitive)."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in PYTHON_SUFFIXES:
        return "python"
    if suffix in CPP_SUFFIXES:
        return "cpp"
    return "other"


def parse_python(data: bytes, path: str) -> tuple[ast.Module | None, list[Finding]]:
    """Parse like the interpreter would (coding cookie included); problems become findings."""
    findings: list[Finding] = []
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return None, [finding("ast.syntax-error", path, 1, f"bad encoding declaration: {exc}")]
    if encoding not in ("utf-8", "utf-8-sig"):
        findings.append(finding("ast.source-encoding", path, 1,
                                f"declares source encoding {encoding!r}: the interpreter would "
                                "decode other code than the analysers read"))
    try:
        tree = ast.parse(data, filename=path)
    except SyntaxError as exc:
        findings.append(finding("ast.syntax-error", path, exc.lineno or 1,
                                f"not valid Python: {exc.msg}"))
        return None, findings
    except (ValueError, UnicodeDecodeError) as exc:  # NUL bytes, undecodable text
        findings.append(finding("ast.syntax-error", path, 1, f"not valid Python: {exc}"))
        return None, findings
    except (RecursionError, MemoryError):
        findings.append(finding("ast.unanalysable", path, 1,
                                "too deeply nested for the parser"))
        return None, findings
    return tree, findings
