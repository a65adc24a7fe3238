"""Constant folding: what an expression is worth when the source alone decides it.

Used to judge reachability (``if STRICT: raise`` with ``STRICT = False`` never raises) and to
see through names built from pieces (``getattr(torch, "cu" + "da")``). A module-level name
counts as a constant only if it is bound exactly once in the whole file, at the top level, to
a foldable value: any second binding anywhere (a function's local of the same name, ``global``
rebinding, ``for``, ``import as``, ``del``) makes it unknown. Writes through namespaces
(``globals()``, ``sys.modules[__name__]``) are findings of their own.

Folding is bounded (short strings, small ints), so a hostile file cannot make it expensive.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

__all__ = ["UNKNOWN", "ModuleConstants"]


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
_MAX_STR = 4096
_MAX_INT_BITS = 256
_SCALARS = (bool, int, float, str, bytes, type(None))
_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_, ast.BitXor: operator.xor, ast.Div: operator.truediv,
}
_CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}


def _bounded(value: Any) -> Any:
    if isinstance(value, (str, bytes)) and len(value) > _MAX_STR:
        return UNKNOWN
    if isinstance(value, int) and not isinstance(value, bool) and (
            value.bit_length() > _MAX_INT_BITS):
        return UNKNOWN
    if isinstance(value, tuple):
        return value if all(_bounded(v) is not UNKNOWN for v in value) else UNKNOWN
    return value if isinstance(value, _SCALARS) else UNKNOWN


def _stored_names(tree: ast.Module) -> dict[str, int]:
    """How many times each name is bound anywhere in the file (any scope)."""
    counts: dict[str, int] = {}

    def bump(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bump(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bump(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                bump((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bump(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for n in node.names:
                bump(n)
        elif isinstance(node, ast.arg):
            bump(node.arg)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bump(node.name)
    return counts


class ModuleConstants:
    """Module-level names bound once to a foldable value, and a folder that uses them."""

    def __init__(self, tree: ast.Module) -> None:
        counts = _stored_names(tree)
        self.values: dict[str, Any] = {}
        for _ in range(4):  # constants defined from earlier constants
            for stmt in tree.body:
                target, value = _single_assignment(stmt)
                if target is None or value is None or counts.get(target, 0) != 1:
                    continue
                folded = self.fold(value)
                if folded is not UNKNOWN:
                    self.values[target] = folded

    def fold(self, expr: ast.expr | None, depth: int = 0) -> Any:
        """The value of ``expr`` if the source alone decides it, else :data:`UNKNOWN`."""
        if expr is None or depth > 100:
            return UNKNOWN
        try:
            return _bounded(self._fold(expr, depth + 1))
        except Exception:  # noqa: BLE001 - 1/0, "a" < 1, ...: undecidable here
            return UNKNOWN

    def _fold(self, e: ast.expr, d: int) -> Any:  # noqa: C901 - a case per node kind
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            return self.values.get(e.id, UNKNOWN)
        if isinstance(e, ast.Attribute) and e.attr == "TYPE_CHECKING":
            return False  # typing.TYPE_CHECKING is False whenever the code runs
        if isinstance(e, (ast.Tuple, ast.List)):
            vals = tuple(self.fold(x, d) for x in e.elts)
            return UNKNOWN if any(v is UNKNOWN for v in vals) else vals
        if isinstance(e, ast.UnaryOp):
            v = self.fold(e.operand, d)
            if v is UNKNOWN:
                return UNKNOWN
            ops: dict[type[ast.unaryop], Callable[[Any], Any]] = {
                ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
                ast.Invert: operator.invert}
            return ops[type(e.op)](v)
        if isinstance(e, ast.BinOp):
            return self._fold_binop(e, d)
        if isinstance(e, ast.BoolOp):
            return self._fold_boolop(e, d)
        if isinstance(e, ast.Compare):
            left = self.fold(e.left, d)
            for op, right_e in zip(e.ops, e.comparators, strict=True):
                right = self.fold(right_e, d)
                if left is UNKNOWN or right is UNKNOWN:
                    return UNKNOWN
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(e, ast.IfExp):
            test = self.fold(e.test, d)
            if test is UNKNOWN:
                return UNKNOWN
            return self.fold(e.body if test else e.orelse, d)
        if isinstance(e, ast.JoinedStr):
            parts = []
            for v in e.values:
                inner = v.value if isinstance(v, ast.FormattedValue) else v
                if isinstance(v, ast.FormattedValue) and (v.format_spec or v.conversion != -1):
                    return UNKNOWN
                folded = self.fold(inner, d)
                if folded is UNKNOWN:
                    return UNKNOWN
                parts.append(str(folded))
            return "".join(parts)
        if isinstance(e, ast.Subscript):
            base, key = self.fold(e.value, d), self._fold_key(e.slice, d)
            return UNKNOWN if base is UNKNOWN or key is UNKNOWN else base[key]
        if isinstance(e, ast.Call):
            return self._fold_call(e, d)
        return UNKNOWN

    def _fold_binop(self, e: ast.BinOp, d: int) -> Any:
        left, right = self.fold(e.left, d), self.fold(e.right, d)
        if left is UNKNOWN or right is UNKNOWN:
            return UNKNOWN
        if isinstance(e.op, ast.Mult) and isinstance(left, (str, bytes, tuple)) and (
                isinstance(right, int) and right * len(left) > _MAX_STR):
            return UNKNOWN
        if isinstance(e.op, ast.Mult) and isinstance(right, (str, bytes, tuple)) and (
                isinstance(left, int) and left * len(right) > _MAX_STR):
            return UNKNOWN
        fn = _BINOPS.get(type(e.op))
        return UNKNOWN if fn is None else fn(left, right)

    def _fold_boolop(self, e: ast.BoolOp, d: int) -> Any:
        result: Any = UNKNOWN
        for v in e.values:
            result = self.fold(v, d)
            if result is UNKNOWN:
                return UNKNOWN
            if isinstance(e.op, ast.And) and not result:
                return result
            if isinstance(e.op, ast.Or) and result:
                return result
        return result

    def _fold_key(self, s: ast.expr, d: int) -> Any:
        if isinstance(s, ast.Slice):
            parts = [None if p is None else self.fold(p, d) for p in (s.lower, s.upper, s.step)]
            return UNKNOWN if any(p is UNKNOWN for p in parts) else slice(*parts)
        return self.fold(s, d)

    def _fold_call(self, e: ast.Call, d: int) -> Any:
        if e.keywords:
            return UNKNOWN
        args = [self.fold(a, d) for a in e.args]
        if any(a is UNKNOWN for a in args):
            return UNKNOWN
        f = e.func
        if isinstance(f, ast.Attribute) and f.attr == "join" and len(args) == 1:
            sep = self.fold(f.value, d)
            if isinstance(sep, str) and isinstance(args[0], tuple):
                return sep.join(args[0])
        if isinstance(f, ast.Name) and f.id in ("chr", "str", "bool", "int") and len(args) == 1:
            conv: dict[str, Callable[[Any], Any]] = {"chr": chr, "str": str, "bool": bool,
                                                     "int": int}
            return conv[f.id](args[0])
        if isinstance(f, ast.Attribute) and f.attr in ("lower", "upper", "strip") and not args:
            base = self.fold(f.value, d)
            return getattr(base, f.attr)() if isinstance(base, str) else UNKNOWN
        return UNKNOWN


def _single_assignment(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
            stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id, stmt.value
    return None, None
