"""Fallbacks: handlers that let the kernel's error pass and compute something else.

A ``try`` around the kernel whose handler *looks* like it re-raises is still a fallback when
the raise cannot run (``if STRICT: raise`` with ``STRICT = False``, ``if False:``,
``while 0:``, ``raise`` after ``return``) or runs only for some errors (``if isinstance(e,
KeyError): raise``). So every handler that can catch an error from a call must end in a raise
on *every* path, judged by constant folding of conditions (module constants bound once);
conditions that cannot be decided count both ways. Handlers of a ``try`` with no call in it
(``try: x = d[k] except KeyError:``) are left alone unless they catch everything, and so is
the one idiom of version compatibility: imports only, falling back to other imports.

Also: ``contextlib.suppress(...)`` around a call, and an ``__exit__`` that can return true.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from .base import CheckerBase, walk_local
from .constants import UNKNOWN, ModuleConstants

__all__ = ["FallbackChecks", "outcomes"]

RAISE, EXIT, FALL = "raise", "exit", "fall"
_IMPORT_ERRORS = {"builtins.ImportError", "builtins.ModuleNotFoundError"}


def outcomes(stmts: Sequence[ast.stmt], consts: ModuleConstants) -> set[str]:
    """How running ``stmts`` can end: ``raise``, ``exit`` (return/break/continue) or ``fall``
    (reach the end). Unreachable statements (after a certain raise or return) never count."""
    possible: set[str] = set()
    for stmt in stmts:
        got = _outcome(stmt, consts)
        possible |= got - {FALL}
        if FALL not in got:
            return possible
    return possible | {FALL}


def _outcome(stmt: ast.stmt, consts: ModuleConstants) -> set[str]:
    if isinstance(stmt, ast.Raise):
        return {RAISE}
    if isinstance(stmt, (ast.Return, ast.Break, ast.Continue)):
        return {EXIT}
    if isinstance(stmt, ast.If):
        test = consts.fold(stmt.test)
        if test is not UNKNOWN:
            return outcomes(stmt.body if test else stmt.orelse, consts)
        return outcomes(stmt.body, consts) | outcomes(stmt.orelse, consts)
    if isinstance(stmt, (ast.While, ast.For, ast.AsyncFor)):
        if isinstance(stmt, ast.While):
            test = consts.fold(stmt.test)
            if test is not UNKNOWN and not test:
                return outcomes(stmt.orelse, consts)
        # the body may run zero times; break/continue inside only leave the loop
        inner = {o for o in outcomes(stmt.body, consts) if o == RAISE}
        return inner | outcomes(stmt.orelse, consts) | {FALL}
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return outcomes(stmt.body, consts) | {FALL}  # a context manager may swallow
    if isinstance(stmt, (ast.Try, ast.TryStar)):
        final = outcomes(stmt.finalbody, consts)
        if FALL not in final:
            return final
        out = outcomes(stmt.body, consts) | outcomes(stmt.orelse, consts)
        for h in stmt.handlers:
            out |= outcomes(h.body, consts)
        return out | {FALL}
    if isinstance(stmt, ast.Match):
        out = {FALL}
        for case in stmt.cases:
            out |= outcomes(case.body, consts)
        return out
    return {FALL}


def _has_call(body: Sequence[ast.AST]) -> bool:
    return any(isinstance(n, (ast.Call, ast.Await, ast.Import, ast.ImportFrom, ast.Yield,
                              ast.YieldFrom)) for n in walk_local(body))


class FallbackChecks(CheckerBase):
    """``visit_Try``/``visit_With``/``__exit__``: errors that do not reach the harness."""

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        calls = _has_call(node.body)
        for h in node.handlers:
            broad = self.is_broad(h.type)
            if not (broad or calls) or self._import_compat(node, h):
                continue
            ends = outcomes(h.body, self.names.consts)
            if ends == {RAISE}:
                continue
            what = "bare except" if h.type is None else f"except {ast.unparse(h.type)}"
            if RAISE in ends or any(isinstance(n, ast.Raise) for n in walk_local(h.body)):
                why = ("re-raises only on some paths (a condition that is false or undecided, "
                       "a raise after return): the error is swallowed otherwise")
            else:
                why = "without re-raise: errors are hidden (silent fallback)"
            self.report("ast.swallowed-exception", h, f"{what} {why}")
        for stmt in walk_local(node.finalbody):
            if isinstance(stmt, (ast.Return, ast.Break, ast.Continue)):
                self.report("ast.swallowed-exception", stmt,
                            "return/break/continue in finally discards the exception")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def _import_compat(self, node: ast.Try | ast.TryStar, h: ast.ExceptHandler) -> bool:
        """``try: import a`` / ``except ImportError: import b``: nothing runs in between."""
        if h.type is None:
            return False
        types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        if not all(self.names.resolve(t) & _IMPORT_ERRORS for t in types):
            return False
        imports = (ast.Import, ast.ImportFrom, ast.Pass)
        return all(isinstance(s, imports) for s in node.body) and all(
            isinstance(s, imports) for s in h.body)

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            ctx = item.context_expr
            if (isinstance(ctx, ast.Call) and "contextlib.suppress" in self.names.resolve(
                    ctx.func) and _has_call(node.body)
                    and not any(self.is_broad(a) for a in ctx.args)):  # broad: CallChecks
                self.report("ast.swallowed-exception", node, "contextlib.suppress(...) around "
                            "a call: its errors never reach the harness")
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    def check_exit(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """An ``__exit__`` returning anything but False/None swallows the block's error."""
        for n in walk_local(fn.body):
            if isinstance(n, ast.Return) and n.value is not None:
                value = self.names.consts.fold(n.value)
                if value is UNKNOWN or value:
                    self.report("ast.swallowed-exception", n, f"{fn.name} may return true: "
                                "the with-block's exceptions are swallowed")
                    return
