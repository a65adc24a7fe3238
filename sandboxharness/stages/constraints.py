"""A definition's constraints, parsed once and evaluated without ``eval``, with bounded work.

A constraint is input: it is parsed into a small AST (length and node count capped), tensor
shape accesses (``x.shape[0]``, ``len(x)``, ``x.size(1)``) are rewritten to the axis they
name, and the rest is checked against an allow-list. Integer results are capped at 2**256 and
exponents at 64, so ``M ** 1000000000 > 0`` is refused at once instead of hanging the host.
Constraints that read tensor *values* (``total_q == qo_indptr[-1].item()``) cannot be judged
from axes: they are kept as data relations that the input recipes satisfy.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..models import Definition

MAX_TEXT = 1000
MAX_NODES = 200
MAX_EXPONENT = 64
MAX_INT = 2 ** 256

_BIN: dict[type, Any] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_CMP: dict[type, Any] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_FUNCS: dict[str, Any] = {"abs": abs, "min": min, "max": max, "int": int}
_DATA_METHODS = {"item", "sum", "max", "min", "numel", "all", "any", "tolist", "long", "int",
                 "float", "abs"}


class ConstraintError(ValueError):
    """A constraint outside the evaluator's bounds or grammar."""


@dataclass(frozen=True)
class Constraint:
    text: str
    tree: ast.expr
    """Shape accesses already rewritten to axis names."""
    data: bool
    """True when it reads tensor values (a data relation, not evaluable from axes)."""
    ends: tuple[str, ast.expr] | None = None
    """``(input, axis expression)`` for ``axes_expr == input[-1]``: the input's last value."""


def _shape_rewrite(definition: Definition) -> ast.NodeTransformer:
    specs = {**definition.inputs, **definition.outputs}

    def dims(name: str) -> list[str] | None:
        spec = specs.get(name)
        return list(spec.shape) if spec is not None and spec.shape is not None else None

    def axis(name: str, index: Any) -> ast.expr | None:
        shape = dims(name)
        if shape is None or not isinstance(index, int) or isinstance(index, bool):
            return None
        if not -len(shape) <= index < len(shape):
            raise ConstraintError(f"{name} has {len(shape)} dimension(s), not index {index}")
        return ast.Name(id=shape[index], ctx=ast.Load())

    class Rewrite(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            v = node.value
            if (isinstance(v, ast.Attribute) and v.attr == "shape"
                    and isinstance(v.value, ast.Name) and isinstance(node.slice, ast.Constant)):
                got = axis(v.value.id, node.slice.value)
                if got is not None:
                    return got
            if (isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(node.slice,
                    ast.UnaryOp) and isinstance(node.slice.op, ast.USub)
                    and isinstance(v.value, ast.Name) and isinstance(node.slice.operand,
                                                                     ast.Constant)):
                val = node.slice.operand.value
                got = axis(v.value.id, -val if isinstance(val, int) else None)
                if got is not None:
                    return got
            return self.generic_visit(node)

        def visit_Call(self, node: ast.Call) -> ast.AST:
            f = node.func
            if isinstance(f, ast.Name) and f.id == "len" and len(node.args) == 1 and isinstance(
                    node.args[0], ast.Name) and dims(node.args[0].id):
                return axis(node.args[0].id, 0) or node
            if (isinstance(f, ast.Attribute) and f.attr == "size" and isinstance(f.value,
                    ast.Name) and len(node.args) == 1 and isinstance(node.args[0], ast.Constant)):
                got = axis(f.value.id, node.args[0].value)
                if got is not None:
                    return got
            return self.generic_visit(node)

    return Rewrite()


def _names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _check_grammar(tree: ast.AST, axes: set[str], tensors: set[str]) -> bool:
    """Allow-listed nodes only; returns whether the constraint reads tensor values."""
    data = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id in tensors:
                data = True
            elif node.id not in axes and node.id not in _FUNCS and node.id != "len":
                raise ConstraintError(f"unknown name {node.id!r}")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float, bool)):
                raise ConstraintError("only numeric constants are allowed")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BIN:
                raise ConstraintError(f"operator {type(node.op).__name__} is not allowed")
            if isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant) and (
                    not isinstance(node.right.value, (int, float))
                    or abs(node.right.value) > MAX_EXPONENT):
                raise ConstraintError(f"exponent {node.right.value!r} exceeds {MAX_EXPONENT}")
        elif isinstance(node, ast.Call):
            f = node.func
            ok = (isinstance(f, ast.Name) and (f.id in _FUNCS or f.id == "len")) or (
                isinstance(f, ast.Attribute) and f.attr in _DATA_METHODS)
            if not ok or node.keywords:
                raise ConstraintError("only abs/min/max/int/len and tensor .item()-style calls")
        elif isinstance(node, ast.Attribute):
            if node.attr not in _DATA_METHODS and node.attr != "shape":
                raise ConstraintError(f"attribute .{node.attr} is not allowed")
        elif not isinstance(node, (ast.Expression, ast.Compare, ast.BoolOp, ast.UnaryOp,
                                   ast.Subscript, ast.Slice, ast.Load, ast.And, ast.Or,
                                   ast.Not, ast.USub, ast.UAdd, *_BIN, *_CMP)):
            raise ConstraintError(f"{type(node).__name__} is not allowed")
    return data


def _last_value_of(node: ast.expr, tensors: set[str]) -> str | None:
    """``x[-1]``, ``x[-1].item()`` or ``int(x[-1])`` -> ``x``."""
    if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "item":
        node = node.func.value
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "int" and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id in tensors and ast.unparse(node.slice) == "-1":
        return node.value.id
    return None


def _prepare(definition: Definition, text: str) -> tuple[ast.expr, bool]:
    if len(text) > MAX_TEXT:
        raise ConstraintError(f"longer than {MAX_TEXT} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ConstraintError(f"not a Python expression: {exc.msg}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ConstraintError(f"more than {MAX_NODES} expression nodes")
    body = _shape_rewrite(definition).visit(tree).body
    data = _check_grammar(body, set(definition.axes),
                          set(definition.inputs) | set(definition.outputs))
    if not data and any(isinstance(n, (ast.Subscript, ast.Attribute)) or (
            isinstance(n, ast.Call) and getattr(n.func, "id", "") not in _FUNCS)
            for n in ast.walk(body)):
        raise ConstraintError("subscripts and methods apply to tensors, not axes")
    return body, data


def axis_expression(definition: Definition, text: str) -> ast.expr:
    """An expression over axes only (a role's bound); ConstraintError otherwise."""
    body, data = _prepare(definition, text)
    if data:
        raise ConstraintError("reads tensor values; a bound is an expression over axes")
    return body


def parse(definition: Definition) -> list[Constraint]:
    """Every constraint of ``definition``; a constraint outside the grammar is bad input."""
    tensors = set(definition.inputs) | set(definition.outputs)
    out = []
    for i, text in enumerate(definition.constraints or []):
        try:
            body, data = _prepare(definition, text)
        except (ConstraintError, RecursionError) as exc:
            raise InputError(f"definition constraints[{i}] {text[:120]!r}: cannot be "
                             f"evaluated: {exc}", where=definition.name) from None
        ends = None
        if data and isinstance(body, ast.Compare) and len(body.ops) == 1 \
                and isinstance(body.ops[0], ast.Eq):
            for a, b in ((body.left, body.comparators[0]), (body.comparators[0], body.left)):
                name = _last_value_of(b, tensors)
                if name and not _names(a) & tensors:
                    ends = (name, a)
        out.append(Constraint(text, body, data, ends))
    return out


def _bounded(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ConstraintError("intermediate value exceeds 2**256")
    return value


def evaluate(node: ast.expr, env: dict[str, int]) -> Any:
    """Evaluate an axis expression (no tensor values). Raises ConstraintError past the
    bounds, ZeroDivisionError for x/0, KeyError for an axis ``env`` lacks."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp):
        v = evaluate(node.operand, env)
        return (not v) if isinstance(node.op, ast.Not) else _bounded(
            -v if isinstance(node.op, ast.USub) else +v)
    if isinstance(node, ast.BinOp):
        left, right = evaluate(node.left, env), evaluate(node.right, env)
        if isinstance(node.op, ast.Pow):
            if not isinstance(right, (int, float)) or abs(right) > MAX_EXPONENT:
                raise ConstraintError(f"exponent {right!r} exceeds {MAX_EXPONENT}")
            if isinstance(left, int) and isinstance(right, int) and right > 0 \
                    and abs(left).bit_length() * right > 260:
                raise ConstraintError("power exceeds 2**256")
        try:
            return _bounded(_BIN[type(node.op)](left, right))
        except (OverflowError, TypeError) as exc:
            raise ConstraintError(str(exc)) from None
    if isinstance(node, ast.BoolOp):
        vals = [evaluate(v, env) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = evaluate(comp, env)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        args = [evaluate(a, env) for a in node.args]
        try:
            return _bounded(_FUNCS[node.func.id](*args))
        except (OverflowError, TypeError, ValueError) as exc:
            raise ConstraintError(str(exc)) from None
    raise ConstraintError(f"{type(node).__name__} reads tensor values")


def env_of(definition: Definition, axes: dict[str, int]) -> dict[str, int]:
    env = {n: a.value for n, a in definition.axes.items() if a.type == "const"}
    env.update(axes)
    return env


def holds(c: Constraint, env: dict[str, int]) -> bool:
    """An axis constraint on concrete axes (a data relation always 'holds' here)."""
    if c.data:
        return True
    try:
        return bool(evaluate(c.tree, env))
    except ZeroDivisionError:
        return False
