"""The policy's source rules applied to the files: this module reads, ``policy`` judges.

Every finding here has the tool ``policy`` and a ``policy.*`` rule id, and comes from a
``policy.Violation`` that carries its reason code; they always block (a policy owner cannot
waive their own policy with ``ignore_rules``).

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

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from ..models import Definition, Policy
from ..policy import (
    NATIVE_SUFFIXES,
    ImportRules,
    ModuleShadowing,
    ModuleUse,
    NativeArtifact,
    Unreadable,
    Violation,
)
from .ast_checks import PythonNames, parse_python, source_kind
from .ast_checks.modmap import via_module
from .interface import Finding

__all__ = ["as_finding", "check_policy", "policy_violations"]


def as_finding(v: Violation) -> Finding:
    """A violation as the static layer reports it (SARIF, ``scan``, the stage's details)."""
    return Finding(tool="policy", rule_id=v.rule_id, severity="high", path=v.path or "",
                   line=v.line, message=v.message)


def check_policy(root: Path, paths: Sequence[str], policy: Policy,
                 definition: Definition | None) -> list[Finding]:
    """All ``policy.*`` findings for the sources ``paths`` under ``root``."""
    return [as_finding(v) for v in policy_violations(root, paths, policy, definition)]


def _local_modules(paths: Sequence[str]) -> set[str]:
    """Top-level module names the candidate's Python (or native) files would provide."""
    out = set()
    for rel in paths:
        p = PurePosixPath(rel)
        if source_kind(rel) == "python" or p.suffix.lower() in NATIVE_SUFFIXES:
            out.add(p.parts[0] if len(p.parts) > 1 else p.name.split(".")[0])
    return out


def policy_violations(root: Path, paths: Sequence[str], policy: Policy,
                      definition: Definition | None) -> list[Violation]:
    """Every violation of the policy's source rules by the files ``paths`` under ``root``."""
    rules = ImportRules.of(policy, definition)
    native, shadowing = NativeArtifact(), ModuleShadowing()
    out = [v for rel in paths if (v := native.check(rel)) is not None]
    local = _local_modules(paths)
    for name in sorted(local):
        # the first path under that name (a name that shadows has one: no dot in it)
        rel = next((p for p in paths if PurePosixPath(p).parts[0].split(".")[0] == name), name)
        if (v := shadowing.check(name, rel)) is not None:
            out.append(v)
    for rel in paths:
        kind = source_kind(rel)
        if kind == "python":
            out.extend(_check_python(root, rel, rules, local))
        elif kind == "cpp" and rules.baseline is not None:
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
            out.extend(v for lineno, line in enumerate(text.splitlines(), start=1)
                       if (v := rules.baseline.check_cpp_line(rel, lineno, line)) is not None)
    return out


def _check_python(root: Path, rel: str, rules: ImportRules, local: set[str]) -> list[Violation]:
    tree, problems = parse_python((root / rel).read_bytes(), rel)
    if tree is None:
        why = problems[0].message if problems else "unreadable"
        return [Unreadable().check(rel, problems[0].line if problems else 1, why)]
    try:
        return _check_names(rel, PythonNames(tree), rules, local)
    except RecursionError:
        return [Unreadable().check(rel, 1, "too deeply nested")]


def _check_names(rel: str, names: PythonNames, rules: ImportRules,
                 local: set[str]) -> list[Violation]:
    out: list[Violation] = []
    for imp in names.imports:
        if imp.level > 0:
            continue  # the candidate's own package
        reached = [imp.module] + ([f"{imp.module}.{imp.name}"]
                                  if imp.name and imp.name != "*" else [])
        shown = reached[-1]
        reached += sorted(via_module(shown))  # from torch import os
        top = imp.module.split(".")[0]
        use = ModuleUse(rel, imp.line, tuple(reached), shown,
                        "imports" if not imp.dynamic else "imports dynamically")
        out.extend(rules.check_import(use, own=top in local or top == "__future__"))
    # one violation of a rule per line: an import already reported covers its references
    reported = {(v.rule_id, v.line) for v in out}
    for dotted, line in names.references():
        if dotted.startswith("."):
            continue
        use = ModuleUse(rel, line, (dotted,), dotted, "uses", reference=True)
        for v in rules.check_reference(use):
            if v is not None and (v.rule_id, v.line) not in reported:
                reported.add((v.rule_id, v.line))
                out.append(v)
    return out
