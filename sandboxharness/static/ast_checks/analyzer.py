"""The entry points: :func:`analyse_source` for one source, :class:`AstAnalyzer` for a tree."""

from __future__ import annotations

import sys
from pathlib import Path

from ..interface import Analyzer, Finding
from .call_checks import CallChecks
from .names import PythonNames
from .reference_checks import ReferenceChecks
from .rules import RULESET_VERSION, finding
from .sources import parse_python, source_kind
from .state_checks import StateChecker
from .statement_checks import StatementChecks
from .store_checks import StoreChecker

__all__ = ["AstAnalyzer", "Checker", "analyse_source"]


class Checker(ReferenceChecks, CallChecks, StatementChecks):
    """Every group of checks in one visitor: one pass over the tree, findings in source order.

    The groups split by node type (no two define the same ``visit_*``), so this class needs
    no code of its own; the order findings are reported in is the one ``analyse_source``
    relies on when it keeps the first finding per rule and line.
    """


def analyse_source(data: bytes | str, path: str, *, forbid_torch_compute: bool = False
                   ) -> list[Finding]:
    """All AST findings for one Python source (``path`` is only used in the findings).

    ``forbid_torch_compute``: the solution claims to be a Triton/CUDA kernel, so torch
    compute calls (anything beyond allocation, dtypes and device queries) are findings.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tree, findings = parse_python(raw, path)
    if tree is None:
        return findings
    try:
        checker = Checker(path, PythonNames(tree), forbid_torch_compute)
        checker.visit(tree)
        StateChecker(checker).run(tree)
        StoreChecker(checker).run(tree)
        findings.extend(checker.findings)
    except RecursionError:
        findings.append(finding("ast.unanalysable", path, 1, "too deeply nested to analyse"))
    seen: set[tuple[str, int]] = set()
    unique = []
    for f in sorted(findings, key=lambda f: (f.line, f.rule_id)):
        if (f.rule_id, f.line) not in seen:
            seen.add((f.rule_id, f.line))
            unique.append(f)
    return unique


class AstAnalyzer(Analyzer):
    """Runs :func:`analyse_source` on every Python source; pure Python, no subprocess."""

    name = "ast"

    def __init__(self, *, forbid_torch_compute: bool = False) -> None:
        """``forbid_torch_compute``: for solutions whose language is not plain Python."""
        self.forbid_torch_compute = forbid_torch_compute

    def scan(self, root: Path, paths: list[str], timeout_s: float) -> list[Finding]:
        findings: list[Finding] = []
        for rel in paths:
            if source_kind(rel) != "python":
                continue
            findings.extend(analyse_source((root / rel).read_bytes(), rel,
                                           forbid_torch_compute=self.forbid_torch_compute))
        return findings

    def version(self) -> str:
        return (f"sandboxharness-ast/{RULESET_VERSION} (python "
                f"{sys.version_info.major}.{sys.version_info.minor})")
