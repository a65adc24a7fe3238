"""Compatibility module: the AST rules live in :mod:`sandboxharness.static.ast_checks`.

Kept so that ``from .ast_rules import ...`` (the static analysers, the policy checks,
SARIF output and outside callers) keeps working unchanged.
"""

from .ast_checks import (
    CPP_SUFFIXES,
    PYTHON_SUFFIXES,
    RULES,
    RULESET_VERSION,
    AstAnalyzer,
    AstRule,
    ImportRef,
    PythonNames,
    SourceKind,
    analyse_source,
    parse_python,
    source_kind,
)

__all__ = [
    "CPP_SUFFIXES", "PYTHON_SUFFIXES", "RULES", "RULESET_VERSION", "AstAnalyzer", "AstRule",
    "ImportRef", "PythonNames", "SourceKind", "analyse_source", "parse_python", "source_kind",
]
