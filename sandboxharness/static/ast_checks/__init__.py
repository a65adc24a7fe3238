"""Our own AST rules: what generic tools miss in kernel code.

bandit and semgrep look for classic security smells. A kernel candidate has other ways to
cheat or escape: patching the timer or ``torch.allclose``, threads that keep working after
the call returns, caches that replay earlier outputs, a ``try/except`` that quietly falls back
to torch, frame walking that reaches the harness's objects. Each rule below has a stable id,
a severity and a message naming the file and line.

Names are resolved through imports and simple aliases (``import time as t``,
``from time import perf_counter``, ``x = os; x.system``, ``getattr(os, "system")``), so a
rule written for ``os.system`` also fires on its aliases. The source is parsed from the
bytes that will be imported, honouring a coding cookie (and flagging any that is not UTF-8).

Layout: ``rules`` (ids, severities, the name and attribute tables), ``sources`` (file kinds,
parsing), ``names`` (alias resolution), one visitor split by node type (``reference_checks``,
``call_checks``, ``statement_checks`` over ``base``), ``state_checks`` (state kept across
calls, a second pass) and ``analyzer`` (the entry points). The package is named for what it
does rather than ``ast``, so ``import ast`` inside it is never ambiguous to a reader.
"""

from .analyzer import AstAnalyzer, analyse_source
from .names import ImportRef, PythonNames
from .rules import RULES, RULESET_VERSION, AstRule
from .sources import CPP_SUFFIXES, PYTHON_SUFFIXES, SourceKind, parse_python, source_kind

__all__ = [
    "CPP_SUFFIXES", "PYTHON_SUFFIXES", "RULES", "RULESET_VERSION", "AstAnalyzer", "AstRule",
    "ImportRef", "PythonNames", "SourceKind", "analyse_source", "parse_python", "source_kind",
]
