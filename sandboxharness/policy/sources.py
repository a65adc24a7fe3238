"""Rules over the source files, one file (or module name) at a time.

The static layer reads the files and asks these rules; none of them reads a file itself.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import ClassVar

from ..models import Language, ReasonCode
from .violation import Violation

__all__ = ["NATIVE_SUFFIXES", "PROTECTED_MODULES", "ModuleShadowing", "NativeArtifact",
           "ScannableEntry", "Unreadable", "Utf8Source"]

NATIVE_SUFFIXES = frozenset({
    ".so", ".pyd", ".pyc", ".pyo", ".pth", ".pyz", ".zip", ".egg", ".whl", ".dylib", ".dll",
    ".a", ".o", ".obj", ".cubin", ".fatbin", ".ptx", ".ltoir", ".bin", ".exe", ".elf",
})
# Modules the harness and its libraries rely on, whatever is installed here.
PROTECTED_MODULES = frozenset({
    "torch", "triton", "numpy", "flashinfer", "flashinfer_bench", "sandboxharness",
    "safetensors", "sitecustomize", "usercustomize", "typing_extensions", "sympy", "jinja2",
    "networkx", "filelock", "fsspec", "mpmath", "setuptools", "pkg_resources", "_distutils_hack",
    "tvm_ffi", "cuda", "nvidia", "pybind11", "conftest",
})
_PYTHON_LANGUAGES = frozenset({Language.PYTHON, Language.TRITON, Language.TILELANG})


@dataclass(frozen=True)
class NativeArtifact:
    """No file the loader could run as native code or bytecode: no analyser reads those."""

    suffixes: frozenset[str] = NATIVE_SUFFIXES
    rule_id: ClassVar[str] = "policy.native-artifact"
    code: ClassVar[ReasonCode] = ReasonCode.POLICY_LANGUAGE

    def check(self, path: str) -> Violation | None:
        suffix = PurePosixPath(path).suffix.lower()
        if suffix not in self.suffixes:
            return None
        return Violation(self.code, self.rule_id,
                         f"{suffix} files can be loaded as native code or bytecode and are not "
                         "analysed; ship sources only", path)


@dataclass(frozen=True)
class ModuleShadowing:
    """No top-level module named like a standard-library, built-in, protected or installed one:
    it could replace that module for the code that runs next to the candidate."""

    protected: frozenset[str] = PROTECTED_MODULES
    rule_id: ClassVar[str] = "policy.module-shadowing"
    code: ClassVar[ReasonCode] = ReasonCode.POLICY_IMPORT

    def check(self, module: str, path: str) -> Violation | None:
        if not self._shadows(module):
            return None
        return Violation(self.code, self.rule_id,
                         f"module name {module!r} shadows a standard-library or installed "
                         "module; rename it", path)

    def _shadows(self, name: str) -> bool:
        if (name in sys.stdlib_module_names or name in self.protected
                or name in sys.builtin_module_names):
            return True
        if not name.isidentifier():
            return False
        try:
            spec = importlib.util.find_spec(name)  # top-level name: searches, imports nothing
        except (ImportError, ValueError):
            return False
        origin = (spec.origin or "") if spec is not None else ""
        return "site-packages" in origin or "dist-packages" in origin


@dataclass(frozen=True)
class ScannableEntry:
    """A Python-family solution's entry file must be one the analysers read as Python: the
    worker loads it as Python whatever its name."""

    languages: frozenset[Language] = field(default=_PYTHON_LANGUAGES)
    rule_id: ClassVar[str] = "policy.unscannable-entry"
    # like a native artifact: code in a form the checks do not read
    code: ClassVar[ReasonCode] = ReasonCode.POLICY_LANGUAGE

    def check(self, language: Language, entry: str, entry_is_python: bool) -> Violation | None:
        if language not in self.languages or entry_is_python:
            return None
        return Violation(self.code, self.rule_id,
                         f"a {language.value} entry file must end in .py (other names are not "
                         "analysed as Python)", entry)


@dataclass(frozen=True)
class Utf8Source:
    """Every source must encode as UTF-8 (what is written is what the analysers read)."""

    rule_id: ClassVar[str] = "policy.invalid-source"
    code: ClassVar[ReasonCode] = ReasonCode.COMPILE_ERROR

    def check(self, path: str, content: str) -> Violation | None:
        try:
            content.encode("utf-8")
        except UnicodeEncodeError as exc:
            return Violation(self.code, self.rule_id,
                             f"not encodable as UTF-8 ({exc.reason})", path)
        return None


@dataclass(frozen=True)
class Unreadable:
    """Fails closed: a Python source the import checks could not read is rejected (the
    worker's interpreter may accept what this one rejects)."""

    rule_id: ClassVar[str] = "policy.unparsable-source"
    code: ClassVar[ReasonCode] = ReasonCode.COMPILE_ERROR

    def check(self, path: str, line: int, why: str) -> Violation:
        return Violation(self.code, self.rule_id,
                         f"import policy could not be checked: {why}", path, line)
