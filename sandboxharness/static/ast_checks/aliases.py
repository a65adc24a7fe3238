"""Where names get their values: the (target, value) pairs name resolution follows.

Assignments (plain, annotated, walrus, unpacking), default arguments, ``with ... as``, ``for``
and comprehension targets (containers are transparent), and the parameters of the file's own
functions at each of their call sites.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

__all__ = ["FUNCS", "Function", "alias_pairs", "own_functions"]

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def own_functions(tree: ast.Module) -> dict[str, list[Function]]:
    """The file's functions, and lambdas bound to a name, by name."""
    out: dict[str, list[Function]] = {}
    for node in ast.walk(tree):
        if isinstance(node, FUNCS):
            out.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(node.value)
    return out


def alias_pairs(tree: ast.Module, functions: dict[str, list[Function]], imported: set[str],
                alias_values: set[int]) -> list[tuple[ast.expr, ast.expr]]:
    """Every (target, value) binding in the file; ids of values bound to a plain name are
    added to ``alias_values`` (those cannot carry a module out of sight)."""
    pairs: list[tuple[ast.expr, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs.extend((t, node.value) for t in node.targets)
            if all(isinstance(t, ast.Name) for t in node.targets):
                alias_values.add(id(node.value))
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            pairs.append((node.target, node.value))
            if isinstance(node.target, ast.Name):
                alias_values.add(id(node.value))
        elif isinstance(node, (*FUNCS, ast.Lambda)):
            a = node.args
            pos = a.posonlyargs + a.args
            defaults = list(zip(pos[len(pos) - len(a.defaults):], a.defaults, strict=True))
            defaults += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                         if d is not None]
            for arg, d in defaults:
                pairs.append((ast.Name(id=arg.arg), d))
                alias_values.add(id(d))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            pairs.extend((i.optional_vars, i.context_expr) for i in node.items
                         if i.optional_vars is not None)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            pairs.append((node.target, node.iter))  # containers are transparent
        elif isinstance(node, ast.Call):
            pairs.extend(_call_site_pairs(node, functions, imported))
    return pairs


def _call_site_pairs(call: ast.Call, functions: dict[str, list[Function]],
                     imported: set[str]) -> Iterator[tuple[ast.expr, ast.expr]]:
    """A call of the file's own function binds its parameters to the arguments."""
    if not isinstance(call.func, ast.Name) or call.func.id in imported:
        return
    for fn in functions.get(call.func.id, ()):
        a = fn.args
        pos = a.posonlyargs + a.args
        for param, arg in zip(pos, call.args, strict=False):
            if not isinstance(arg, ast.Starred):
                yield ast.Name(id=param.arg), arg
        by_name = {p.arg for p in pos + a.kwonlyargs}
        for kw in call.keywords:
            if kw.arg in by_name:
                yield ast.Name(id=kw.arg), kw.value
