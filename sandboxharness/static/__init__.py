"""Static analysis: bandit, semgrep (local rules, offline) and our AST rules, plus policy checks.

Analysers read sources, never run them. ``run_static`` is the stage entry point
(``run_static_batch``: the same answers for many candidates, one process per tool); a
candidate's code can only produce findings, a tool that fails raises ``ToolError``.
"""

from .ast_checks import RULES, AstAnalyzer, analyse_source, source_kind
from .bandit import BanditAnalyzer
from .batch import run_static_batch
from .imports import check_policy
from .interface import SEVERITY_RANK, Analyzer, Finding, Severity
from .runner import StaticReport, analyzers_for, is_blocking, run_static, scan_files
from .sarif import to_sarif
from .semgrep import SemgrepAnalyzer, default_rules_dir

__all__ = [
    "RULES", "SEVERITY_RANK", "Analyzer", "AstAnalyzer", "BanditAnalyzer", "Finding",
    "SemgrepAnalyzer", "Severity", "StaticReport", "analyse_source", "analyzers_for",
    "check_policy", "default_rules_dir", "is_blocking", "run_static", "run_static_batch",
    "scan_files", "source_kind", "to_sarif",
]
