"""Stores on objects the candidate did not create.

Name-anchored rules see ``torch.cuda.synchronize = f``; they miss the same store made through
an object they cannot resolve: a parameter (``def patch(m): m.synchronize = f``), a value from
a container, a call result, an attribute of something else (``K.mod.synchronize = f``), or a
returned tensor given a per-instance ``detach``. So every attribute store (``x.a = v``,
``x.a += v``, ``del x.a``, ``setattr(x, "a", v)``) is a finding unless ``x`` is plainly the
candidate's own object: ``self``/``cls`` in its own class's methods, one of its own functions
or classes, or a name every binding of which (in its scope) creates a fresh object of the
candidate's own (an instance of its class, ``object()``, ``types.SimpleNamespace()``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

from .base import CheckerBase, walk_local

__all__ = ["StoreChecker"]

_FRESH_CALLS = {"builtins.object", "types.SimpleNamespace", "argparse.Namespace"}
_SETATTR = {"builtins.setattr", "builtins.delattr"}
# Decorators that hand back the candidate's own function or class.
_PLAIN_DECORATORS = {"staticmethod", "classmethod", "property", "dataclass"}
_PLAIN_DECORATOR_PATHS = {"dataclasses.dataclass", "functools.wraps",
                          "functools.total_ordering", "builtins.staticmethod",
                          "builtins.classmethod", "builtins.property"}
_Fn = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


class StoreChecker:
    """Walks each scope with the names it owns; reports stores on anything else."""

    def __init__(self, checker: CheckerBase) -> None:
        self.c = checker
        self.classes: set[str] = set()

    def run(self, tree: ast.Module) -> None:
        self.classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        module_owned = self.owned(tree.body, frozenset())
        self.check(tree.body, module_owned)
        self.walk(tree, [module_owned], in_class=False)

    def walk(self, node: ast.AST, stack: list[set[str]], in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                body = child.body if isinstance(child.body, list) else [child.body]
                selfish = frozenset({child.args.args[0].arg}) if (
                    in_class and child.args.args and not _is_static(child)) else frozenset()
                owned = self.owned(body, selfish, child, stack)
                self.check(body, owned)
                self.walk(child, [*stack, owned], in_class=False)
            elif isinstance(child, ast.ClassDef):
                owned = self.owned(child.body, frozenset(), None, stack)
                self.check(child.body, owned)
                self.walk(child, [*stack, owned], in_class=True)
            else:
                self.walk(child, stack, in_class)

    def owned(self, body: Sequence[ast.AST], selfish: frozenset[str], fn: _Fn | None = None,
              stack: Sequence[set[str]] = ()) -> set[str]:
        """Names of ``body``'s scope that always hold the candidate's own objects."""
        fresh: set[str] = set(selfish)
        other: set[str] = set()
        if fn is not None:
            a = fn.args
            params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
            params += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
            other.update(p for p in params if p not in selfish)
        declared: set[str] = set()
        seen: set[int] = set()  # target names already judged with their assignment
        for node in walk_local(body):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                declared.update(node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # a decorated name holds what the decorator returned (a JITFunction, ...)
                (other if self.decorated(node) else fresh).add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        (fresh if self.is_fresh(node.value) else other).add(t.id)
                        seen.add(id(t))
                    else:
                        other.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name)
                                     and isinstance(n.ctx, ast.Store))
            elif (isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del))
                  and id(node) not in seen):
                other.add(node.id)  # for/with targets, augmented assignment, del
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                other.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                other.add(node.name)
        own = fresh - other - declared
        bound = fresh | other
        for outer in reversed(stack):  # free names: what the enclosing scope owns
            own |= {n for n in outer if n not in bound}
        return own

    def decorated(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            names = self.c.names.resolve(target)
            if isinstance(target, ast.Name) and target.id in _PLAIN_DECORATORS:
                continue
            if not names & _PLAIN_DECORATOR_PATHS:
                return True
        return False

    def is_fresh(self, value: ast.expr | None) -> bool:
        if isinstance(value, ast.Lambda):
            return True
        if not isinstance(value, ast.Call):
            return False
        if isinstance(value.func, ast.Name) and value.func.id in self.classes:
            return True
        return bool(self.c.names.resolve(value.func) & _FRESH_CALLS)

    def check(self, body: Sequence[ast.AST], owned: set[str]) -> None:
        for obj, attr, node in _stores(body, self.c):
            if isinstance(obj, ast.Name) and obj.id in owned:
                continue
            if attr == "__class__":
                continue  # reported as a type swap (ast.tensor-subclass)
            what = ast.unparse(obj)
            what = what if len(what) <= 40 else what[:37] + "..."
            self.c.report("ast.monkeypatch", node, f"sets .{attr} on {what}, an object the "
                          "candidate did not create (a parameter, library object or value "
                          "from elsewhere): it may patch library code or the harness's data")


def _stores(body: Sequence[ast.AST], c: CheckerBase) -> Iterator[tuple[ast.expr, str, ast.AST]]:
    """(object, attribute, node) for every attribute store in one scope."""
    for node in walk_local(body):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            yield node.value, node.attr, node
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            func = c.names.resolve(node.func)
            obj = node.args[0]
            if not func & _SETATTR:
                if not (isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("__setattr__", "__delattr__")
                        and c.names.resolve(node.func.value) & {"builtins.object",
                                                                "builtins.type"}):
                    continue
            name = c.names.literal(node.args[1])
            if name is not None:  # computed names are reported where the call is checked
                yield obj, name, node


def _is_static(fn: _Fn) -> bool:
    if isinstance(fn, ast.Lambda):
        return True
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
