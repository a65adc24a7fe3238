"""Policy checks over the sources: imports, the baseline library, shadowing, loadable files.

Every finding here has the tool ``policy`` and a ``policy.*`` rule id; they always block
(a policy owner cannot waive their own policy with ``ignore_rules``).

* ``policy.import-denied``: an import (static, or ``importlib.import_module``/``__import__``
  with a name folded from constants) or a reference through an imported name that falls
  under ``Policy.imports.deny`` (dotted prefixes: ``torch.utils.cpp_extension`` denies its
  submodules and attributes too). References follow aliases (see ``ast_checks.names``), and a
  denied module reached as an attribute of an allowed one (``os.sys.modules``,
  ``torch.os``, ``from numpy import os``, ``vars(torch)["os"]``) is the denied module.
* ``policy.import-not-allowed``: an absolute import outside ``Policy.imports.allow`` when
  that list is set. ``__future__`` and the candidate's own modules are always allowed.
* ``policy.baseline-call``: with ``forbid_baseline_library``, any import of or reference to
  the top-level package of the definition's ``fi_api`` (``flashinfer.norm.rmsnorm`` ->
  ``flashinfer``), in Python, or an ``#include <flashinfer/...>`` / ``flashinfer::`` in
  C++/CUDA.
* ``policy.module-shadowing``: a source whose top-level module name is a standard-library or
  installed module (``torch.py``, ``inspect.py``, ``triton/``): it could replace that module
  for the code that runs next to the candidate.
* ``policy.native-artifact``: a source that the loader could execute as native code or
  bytecode (``.so``, ``.pyc``, ``.pth``, ``.cubin``, ...); no analyser reads those.
* ``policy.unparsable-source``: a Python source the checks above could not read; it fails
  closed (the worker's interpreter may accept what this one rejects).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from ..models import Definition, Policy
from .ast_checks import PythonNames, parse_python, source_kind
from .ast_checks.modmap import via_module
from .interface import Finding

__all__ = ["NATIVE_SUFFIXES", "check_policy", "matches_prefix"]

NATIVE_SUFFIXES = frozenset({
    ".so", ".pyd", ".pyc", ".pyo", ".pth", ".pyz", ".zip", ".egg", ".whl", ".dylib", ".dll",
    ".a", ".o", ".obj", ".cubin", ".fatbin", ".ptx", ".ltoir", ".bin", ".exe", ".elf",
})
# Modules the harness and its libraries rely on, whatever is installed here.
_PROTECTED = frozenset({
    "torch", "triton", "numpy", "flashinfer", "flashinfer_bench", "sandboxharness",
    "safetensors", "sitecustomize", "usercustomize", "typing_extensions", "sympy", "jinja2",
    "networkx", "filelock", "fsspec", "mpmath", "setuptools", "pkg_resources", "_distutils_hack",
    "tvm_ffi", "cuda", "nvidia", "pybind11", "conftest",
})


def matches_prefix(name: str, prefixes: Iterable[str]) -> str | None:
    """The first of ``prefixes`` that ``name`` equals or lies under (dotted), else ``None``."""
    for p in prefixes:
        if name == p or name.startswith(p + "."):
            return p
    return None


def _finding(rule_id: str, path: str, line: int, message: str) -> Finding:
    return Finding(tool="policy", rule_id=rule_id, severity="high", path=path, line=line,
                   message=message)


def _local_modules(paths: Sequence[str]) -> set[str]:
    """Top-level module names the candidate's Python (or native) files would provide."""
    out = set()
    for rel in paths:
        p = PurePosixPath(rel)
        if source_kind(rel) == "python" or p.suffix.lower() in NATIVE_SUFFIXES:
            out.add(p.parts[0] if len(p.parts) > 1 else p.name.split(".")[0])
    return out


def _is_shadowing(name: str) -> bool:
    if name in sys.stdlib_module_names or name in _PROTECTED or name in sys.builtin_module_names:
        return True
    if not name.isidentifier():
        return False
    try:
        spec = importlib.util.find_spec(name)  # top-level name: searches, imports nothing
    except (ImportError, ValueError):
        return False
    origin = (spec.origin or "") if spec is not None else ""
    return "site-packages" in origin or "dist-packages" in origin


def check_policy(root: Path, paths: Sequence[str], policy: Policy,
                 definition: Definition | None) -> list[Finding]:
    """All ``policy.*`` findings for the sources ``paths`` under ``root``."""
    findings: list[Finding] = []
    local = _local_modules(paths)
    baseline = None
    if policy.forbid_baseline_library and definition is not None and definition.fi_api:
        baseline = definition.fi_api.split(".")[0]
    for rel in paths:
        suffix = PurePosixPath(rel).suffix.lower()
        if suffix in NATIVE_SUFFIXES:
            findings.append(_finding("policy.native-artifact", rel, 1,
                                     f"{suffix} files can be loaded as native code or bytecode "
                                     "and are not analysed; ship sources only"))
    for name in sorted(local):
        if _is_shadowing(name):
            rel = next(p for p in paths if PurePosixPath(p).parts[0].split(".")[0] == name)
            findings.append(_finding("policy.module-shadowing", rel, 1,
                                     f"module name {name!r} shadows a standard-library or "
                                     "installed module; rename it"))
    for rel in paths:
        kind = source_kind(rel)
        if kind == "python":
            findings.extend(_check_python(root, rel, policy, local=local, baseline=baseline,
                                          definition=definition))
        elif kind == "cpp" and baseline:
            findings.extend(_check_cpp_baseline(root, rel, baseline, definition))
    return findings


def _baseline_message(what: str, definition: Definition | None) -> str:
    api = definition.fi_api if definition is not None else None
    return (f"{what}: the definition's baseline library (fi_api {api}); the policy forbids "
            "calling it")


def _check_python(root: Path, rel: str, policy: Policy, *, local: set[str],
                  baseline: str | None, definition: Definition | None) -> list[Finding]:
    tree, problems = parse_python((root / rel).read_bytes(), rel)
    if tree is None:
        why = problems[0].message if problems else "unreadable"
        return [_finding("policy.unparsable-source", rel, problems[0].line if problems else 1,
                         f"import policy could not be checked: {why}")]
    try:
        return _check_imports(rel, PythonNames(tree), policy, local=local, baseline=baseline,
                              definition=definition)
    except RecursionError:
        return [_finding("policy.unparsable-source", rel, 1,
                         "import policy could not be checked: too deeply nested")]


def _check_imports(rel: str, names: PythonNames, policy: Policy, *, local: set[str],
                   baseline: str | None, definition: Definition | None) -> list[Finding]:
    out: list[Finding] = []
    deny, allow = policy.imports.deny, policy.imports.allow
    for imp in names.imports:
        if imp.level > 0:
            continue  # the candidate's own package
        candidates = [imp.module] + ([f"{imp.module}.{imp.name}"]
                                     if imp.name and imp.name != "*" else [])
        shown = candidates[-1]
        candidates += sorted(via_module(shown))  # from torch import os
        top = imp.module.split(".")[0]
        how = "imports" if not imp.dynamic else "imports dynamically"
        if baseline and any(matches_prefix(c, [baseline]) for c in candidates):
            out.append(_finding("policy.baseline-call", rel, imp.line,
                                _baseline_message(f"{how} {candidates[-1]}", definition)))
        if top in local or top == "__future__":
            continue
        hit = next((d for c in candidates if (d := matches_prefix(c, deny))), None)
        if hit:
            out.append(_finding("policy.import-denied", rel, imp.line,
                                f"{how} {shown} (policy denies {hit!r})"))
        elif allow is not None and not any(matches_prefix(c, allow) for c in candidates):
            out.append(_finding("policy.import-not-allowed", rel, imp.line,
                                f"{how} {shown}: not in the policy's allow list"))
    reported = {(f.rule_id, f.line) for f in out}
    for dotted, line in names.references():
        if dotted.startswith("."):
            continue
        hit = matches_prefix(dotted, deny)
        if hit and ("policy.import-denied", line) not in reported:
            reported.add(("policy.import-denied", line))
            out.append(_finding("policy.import-denied", rel, line,
                                f"uses {dotted} (policy denies {hit!r})"))
        if baseline and ("policy.baseline-call", line) not in reported and (
                baseline in dotted.split(".")):
            reported.add(("policy.baseline-call", line))
            out.append(_finding("policy.baseline-call", rel, line,
                                _baseline_message(f"uses {dotted}", definition)))
    return out


def _check_cpp_baseline(root: Path, rel: str, baseline: str,
                        definition: Definition | None) -> list[Finding]:
    text = (root / rel).read_text(encoding="utf-8", errors="replace")
    rx = re.compile(rf"#\s*include\s*[<\"]\s*{re.escape(baseline)}[/.]|\b{re.escape(baseline)}::")
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if rx.search(line):
            out.append(_finding("policy.baseline-call", rel, lineno,
                                _baseline_message(f"uses {baseline} from C++", definition)))
    return out
