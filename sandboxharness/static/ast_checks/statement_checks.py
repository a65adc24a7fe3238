"""Checks on statements: swallowed exceptions, tensor subclasses, global and nonlocal."""

from __future__ import annotations

import ast
import re

from .base import walk_local
from .fallback_checks import FallbackChecks

__all__ = ["StatementChecks"]

_TENSOR_BASES = re.compile(
    r"^torch\.(Tensor|_C\._?TensorBase|nn\.Parameter|nn\.parameter\.(Parameter|Buffer))$")


class StatementChecks(FallbackChecks):
    """Statements that hide errors or change what objects are, whatever names they use."""

    def visit_Module(self, node: ast.Module) -> None:
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in (
                    "__getattr__", "__dir__"):
                self.report("ast.dynamic-code", stmt, f"module-level {stmt.name}: names "
                            "looked up on this module (the entry point too) run its code")
        self.generic_visit(node)

    # -- classes and functions -----------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for b in node.bases:
            for dotted in self.names.resolve(b):
                if _TENSOR_BASES.match(dotted):
                    self.report("ast.tensor-subclass", node,
                                f"class {node.name} subclasses {dotted}")
        for stmt in node.body:
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if stmt.name in ("__del__", "__init_subclass__", "__set_name__"):
                self.report("ast.deferred-callback", stmt, f"{node.name}.{stmt.name} runs "
                            "when objects die or classes are made, outside the call")
            elif stmt.name in ("__exit__", "__aexit__"):
                self.check_exit(stmt)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.report("ast.tensor-subclass", node, f"defines {node.name}")
        for t in walk_local(node.body):
            # a generator's finally/except runs when it is closed or collected, not in a call
            if isinstance(t, (ast.Try, ast.TryStar)) and (t.finalbody or t.handlers) and any(
                    isinstance(n, (ast.Yield, ast.YieldFrom)) for n in walk_local(t.body)):
                self.report("ast.deferred-callback", t, f"{node.name}: try around a yield runs "
                            "its handlers when the generator is closed or collected")
                break
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Global(self, node: ast.Global) -> None:
        self.report("ast.global-state", node, f"global {', '.join(node.names)}: state kept "
                    "across calls")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.report("ast.global-state", node, f"nonlocal {', '.join(node.names)}: closure "
                    "state kept across calls")

