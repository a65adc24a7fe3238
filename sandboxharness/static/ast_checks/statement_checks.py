"""Checks on statements: swallowed exceptions, tensor subclasses, global and nonlocal."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from .base import CheckerBase, walk_local

__all__ = ["StatementChecks"]

_TENSOR_BASES = re.compile(
    r"^torch\.(Tensor|_C\._?TensorBase|nn\.Parameter|nn\.parameter\.(Parameter|Buffer))$")


class StatementChecks(CheckerBase):
    """Statements that hide errors or change what objects are, whatever names they use."""

    # -- exceptions ----------------------------------------------------------------------------
    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        for h in node.handlers:
            if self.is_broad(h.type) and not _raises(h.body):
                what = "bare except" if h.type is None else f"except {ast.unparse(h.type)}"
                self.report("ast.swallowed-exception", h,
                            f"{what} without re-raise: errors are hidden (silent fallback)")
        for stmt in walk_local(node.finalbody):
            if isinstance(stmt, (ast.Return, ast.Break, ast.Continue)):
                self.report("ast.swallowed-exception", stmt,
                            "return/break/continue in finally discards the exception")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    # -- classes and functions -----------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for b in node.bases:
            for dotted in self.names.resolve(b):
                if _TENSOR_BASES.match(dotted):
                    self.report("ast.tensor-subclass", node,
                                f"class {node.name} subclasses {dotted}")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.report("ast.tensor-subclass", node, f"defines {node.name}")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Global(self, node: ast.Global) -> None:
        self.report("ast.global-state", node, f"global {', '.join(node.names)}: state kept "
                    "across calls")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.report("ast.global-state", node, f"nonlocal {', '.join(node.names)}: closure "
                    "state kept across calls")


def _raises(body: Sequence[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Raise) for n in walk_local(body))
