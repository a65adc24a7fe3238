"""What every group of checks shares: the findings list, name lookups and scope-local walks."""

from __future__ import annotations

import ast
import re

from ..interface import Finding
from .names import BUILTIN_NAMES, PythonNames
from .rules import NAME_RULES, finding
from .walk import walk_local

__all__ = ["CheckerBase", "walk_local"]

_SUSPICIOUS_STRING = re.compile(
    r"__(globals|builtins|subclasses|import|code|closure|bases|mro|dict|class|getattribute|"
    r"setattr|delattr|loader|traceback|self|func|wrapped|del)__|\bf_(back|globals|locals|builtins)\b|"
    r"\b(tb|gi|cr|ag)_frame\b|\bcell_contents\b|\b_getframe\b|\bcurrentframe\b")
# Paths that describe the machine or the process rather than data a kernel would need.
_SYSTEM_PATH = re.compile(r"^/(proc|sys|dev|etc|run|var/run|\.dockerenv|\.containerenv)(/|$)")


class CheckerBase(ast.NodeVisitor):
    """The state and helpers each group of checks uses; the groups are combined in
    :class:`~.analyzer.Checker`."""

    def __init__(self, path: str, names: PythonNames, forbid_torch_compute: bool = False
                 ) -> None:
        self.path = path
        self.names = names
        self.forbid_torch_compute = forbid_torch_compute
        self.findings: list[Finding] = []
        self.bases: set[int] = set()
        """Nodes used as the object of ``x.attr`` or ``getattr(x, ...)``."""
        self.called: set[int] = set()
        """Nodes called as a function (``f`` in ``f(...)``)."""

    def report(self, rule_id: str, node: ast.AST, message: str) -> None:
        self.findings.append(finding(rule_id, self.path, getattr(node, "lineno", 1), message))

    def check_string(self, node: ast.AST, value: str | bytes) -> None:
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if _SUSPICIOUS_STRING.search(text):
            self.report("ast.introspection", node,
                        "string names a sensitive attribute (dynamic access)")
        if _SYSTEM_PATH.match(text.strip()):
            self.report("ast.env-probe", node, f"names a system path ({text[:40]!r}): "
                        "reads the machine or the process tree")

    def check_folded(self, node: ast.expr) -> None:
        """A string assembled from constant pieces (``"/pr" + "oc"``, ``"sl"[::-1]``)."""
        value = self.names.consts.fold(node)
        if isinstance(value, (str, bytes)):
            self.check_string(node, value)

    def check_name(self, dotted: str, node: ast.AST) -> None:
        for rx, rule_id, what in NAME_RULES:
            if rx.match(dotted):
                self.report(rule_id, node, f"{dotted}: {what}")
                return

    def derived(self, expr: ast.expr) -> str | None:
        """The module-derived name ``expr`` hangs off (following ``.attr``, ``[i]`` and calls),
        or a class obtained at run time (``type(x)``, ``x.__class__``); ``None`` otherwise."""
        node: ast.expr = expr
        while True:
            if isinstance(node, ast.Name) and node.id in BUILTIN_NAMES:
                # an implicit builtin name (often a parameter: ``input``) is no module
                res = sorted(self.names.bindings.get(node.id, ()))
                if res:
                    return res[0]
            else:
                res = sorted(self.names.resolve(node) - {"builtins.type"})
                if res:
                    return res[0]
            if isinstance(node, ast.Attribute):
                if node.attr == "__class__":
                    return "<object>.__class__"
                node = node.value
            elif isinstance(node, (ast.Subscript, ast.Starred, ast.NamedExpr)):
                node = node.value
            elif isinstance(node, ast.Call):
                if "builtins.type" in self.names.resolve(node.func):
                    return "type(...)"
                node = node.func
            else:
                return None

    def is_broad(self, expr: ast.expr | None) -> bool:
        """``expr`` (an ``except`` clause's type) catches ``Exception`` or everything."""
        if expr is None:
            return True
        if isinstance(expr, ast.Tuple):
            return any(self.is_broad(e) for e in expr.elts)
        return bool(self.names.resolve(expr) & {"builtins.Exception", "builtins.BaseException"})

