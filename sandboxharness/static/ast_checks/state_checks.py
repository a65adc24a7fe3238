"""State kept across calls: containers, attributes and defaults that outlive one call.

A kernel that stores inputs or outputs between calls can replay an earlier result instead of
computing, so every mutation of something that survives the call is reported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .base import CheckerBase, walk_local

__all__ = ["StateChecker"]

_CONTAINER_CALLS = re.compile(
    r"^(builtins\.(dict|list|set|bytearray)|collections\.(defaultdict|OrderedDict|Counter|"
    r"deque|ChainMap)|weakref\.(WeakValueDictionary|WeakKeyDictionary|WeakSet)|array\.array|"
    r"queue\.\w+|torch\.(empty|zeros|ones|full|rand|randn|tensor|as_tensor|arange|"
    r"empty_strided|\w+_like)|builtins\.(iter|enumerate|zip|map|filter|reversed)|"
    r"itertools\.\w+)$")
# Methods that set an object up; attributes they store are not state kept across calls.
_INIT_METHODS = frozenset({"__init__", "__new__", "__post_init__", "__init_subclass__",
                           "__set_name__", "__setstate__", "setup", "reset_parameters"})
_MUTATORS = frozenset({
    "append", "extend", "insert", "update", "setdefault", "add", "pop", "popitem", "clear",
    "remove", "discard", "appendleft", "extendleft", "popleft", "rotate", "__setitem__",
    "__delitem__", "sort", "reverse", "move_to_end", "difference_update",
    "intersection_update", "symmetric_difference_update", "__ior__", "copy_", "fill_",
    "zero_", "put_", "index_put_", "scatter_", "set_", "resize_", "__iadd__",
})


@dataclass
class _Scope:
    """A module, class or function body on the way down, with the containers it binds."""

    node: ast.AST
    containers: dict[str, int]
    is_class: bool = False
    instance_containers: frozenset[str] = frozenset()
    name: str = ""


class StateChecker:
    """Containers bound in one scope and mutated from a function that outlives the binding."""

    def __init__(self, checker: CheckerBase) -> None:
        self.c = checker
        self.module_defs: set[str] = set()
        self.module_objects: set[str] = set()
        """Module-level names bound to something other than a module (objects, values)."""
        self.long_lived: set[str] = set()
        """The file's classes with an instance made at module level (it serves every call)."""
        self._bound_cache: dict[int, set[str]] = {}
        self.persistent_args: dict[str, set[str]] = {}
        """Parameters of the file's functions that receive a container outliving the call
        (a module-level one at a call site, or one bound by a module-level partial)."""

    def is_container(self, expr: ast.expr | None) -> bool:
        if isinstance(expr, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp,
                             ast.SetComp, ast.GeneratorExp)):
            return True
        if isinstance(expr, ast.Call):
            return any(_CONTAINER_CALLS.match(r) for r in self.c.names.resolve(expr.func))
        return False

    def containers(self, body: Sequence[ast.AST]) -> dict[str, int]:
        out: dict[str, int] = {}
        for node in walk_local(body):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign) and self.is_container(node.value):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign) and self.is_container(node.value):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = t.lineno
        return out

    def run(self, tree: ast.Module) -> None:
        self.module_defs = {n.name for n in tree.body
                            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                              ast.ClassDef))}
        imported = {(a.asname or a.name).split(".")[0] for n in walk_local(tree.body)
                    if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        aliases = {n for n, r in self.c.names.bindings.items() if r}  # of library objects
        self.module_objects = _bound_names(tree.body) - imported - self.module_defs - aliases
        classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        self.long_lived = {n.value.func.id for n in walk_local(tree.body)
                           if isinstance(n, (ast.Assign, ast.AnnAssign))
                           and isinstance(n.value, ast.Call)
                           and isinstance(n.value.func, ast.Name)
                           and n.value.func.id in classes}
        module_containers = self.containers(tree.body)
        self.persistent_args = self._persistent_args(tree, set(module_containers))
        self.walk(tree, [_Scope(tree, module_containers)])

    def _persistent_args(self, tree: ast.Module, module_containers: set[str]
                         ) -> dict[str, set[str]]:
        funcs = {n.name: n for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        top_level = {id(n) for n in walk_local(tree.body)}
        out: dict[str, set[str]] = {}
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            args, fname, via_partial = list(call.args), None, False
            if isinstance(call.func, ast.Name) and call.func.id in funcs:
                fname = call.func.id
            elif (id(call) in top_level and args and isinstance(args[0], ast.Name)
                  and args[0].id in funcs
                  and "functools.partial" in self.c.names.resolve(call.func)):
                fname, args, via_partial = args[0].id, args[1:], True  # partial(_run, s={})
            if fname is None:
                continue
            values = [(p.arg, e) for p, e in zip(funcs[fname].args.posonlyargs
                                                 + funcs[fname].args.args, args, strict=False)]
            values += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
            hit = {name for name, e in values
                   if (isinstance(e, ast.Name) and e.id in module_containers)
                   or (via_partial and self.is_container(e))}
            if hit:
                out.setdefault(fname, set()).update(hit)
        return out

    def walk(self, node: ast.AST, stack: list[_Scope]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                self.check_function(child, stack)
                body = child.body if isinstance(child.body, list) else [child.body]
                self.walk(child, [*stack, _Scope(child, self.containers(body))])
            elif isinstance(child, ast.ClassDef):
                inst = {t.attr for m in child.body
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                        for n in walk_local(m.body) if isinstance(n, ast.Assign)
                        and self.is_container(n.value)
                        for t in n.targets if isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name) and t.value.id == "self"}
                self.walk(child, [*stack, _Scope(child, self.containers(child.body), True,
                                                 frozenset(inst), child.name)])
            else:
                self.walk(child, stack)

    def check_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,  # noqa: C901 - one walk
                       stack: list[_Scope]) -> None:
        body: list[ast.AST] = list(fn.body) if isinstance(fn.body, list) else [fn.body]
        a = fn.args
        params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        pos = a.posonlyargs + a.args
        mutable_defaults = {arg.arg for arg, d in zip(pos[len(pos) - len(a.defaults):],
                                                      a.defaults, strict=True)
                            if self.is_container(d)}
        mutable_defaults |= {arg.arg for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                             if d is not None and self.is_container(d)}
        mutable_defaults |= self.persistent_args.get(getattr(fn, "name", ""), set())
        declared = {n for s in walk_local(body) if isinstance(s, (ast.Global, ast.Nonlocal))
                    for n in s.names}
        local = (params | _bound_names(body)) - declared
        cls = next((s for s in reversed(stack) if s.is_class), None)
        in_method = bool(stack) and stack[-1].is_class
        fname = getattr(fn, "name", "<lambda>")
        for target, node in _mutations(body):
            if isinstance(target, ast.Name):
                n = target.id
                if n in local:
                    if n in mutable_defaults:
                        self.c.report("ast.global-state", node, f"mutates argument {n!r}: "
                                      "its default, or what the file passes it, persists "
                                      "across calls")
                    continue
                for scope in reversed(stack):
                    if not scope.is_class and n in scope.containers:
                        where = "module-level" if isinstance(scope.node, ast.Module) else \
                            "enclosing"
                        self.c.report("ast.global-state", node, f"mutates {where} container "
                                      f"{n!r} (line {scope.containers[n]}): persists across "
                                      "calls")
                        break
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                b, attr = target.value.id, target.attr
                if (in_method and cls is not None and b in ("self", "cls")
                        and fname != "__init__"
                        and (attr in cls.containers or attr in cls.instance_containers)):
                    self.c.report("ast.global-state", node, f"mutates container {b}.{attr} "
                                  "kept on the object across calls")
                elif b in self.module_defs and b not in local:
                    self.c.report("ast.global-state", node, f"mutates {b}.{attr}: state "
                                  "stored on a module-level function or class")
                elif self._outlives(b, local, stack):
                    self.c.report("ast.global-state", node, f"mutates {b}.{attr}: state "
                                  "stored on an object that outlives the call")
                elif (in_method and cls is not None and b in ("self", "cls")
                      and cls.name in self.long_lived and fname not in _INIT_METHODS):
                    self.c.report("ast.global-state", node, f"mutates {b}.{attr} on an "
                                  f"instance of {cls.name} made at module level: state kept "
                                  "across calls")
        for node in walk_local(body):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)):
                        continue
                    b = t.value.id
                    if b in self.module_defs and b not in local:
                        self.c.report("ast.global-state", node, f"sets {b}.{t.attr}:"
                                      " state stored on a module-level function or class")
                    elif self._outlives(b, local, stack):
                        self.c.report("ast.global-state", node, f"sets {b}.{t.attr}: state "
                                      "stored on an object that outlives the call")
                    elif (in_method and cls is not None and b in ("self", "cls")
                          and cls.name in self.long_lived and fname not in _INIT_METHODS):
                        self.c.report("ast.global-state", node, f"sets {b}.{t.attr} on an "
                                      f"instance of {cls.name} made at module level: state "
                                      "kept across calls")

    def _outlives(self, name: str, local: set[str], stack: list[_Scope]) -> bool:
        """``name`` is free here and bound to an object in the module or an enclosing
        function (not an imported module: stores on those are monkeypatching)."""
        if name in local:
            return False
        if any(not s.is_class and not isinstance(s.node, ast.Module)
               and name in self._bound_in(s.node) for s in stack):
            return True
        return name in self.module_objects

    def _bound_in(self, node: ast.AST) -> set[str]:
        key = id(node)
        if key not in self._bound_cache:
            self._bound_cache[key] = _bound_names(_body(node))
        return self._bound_cache[key]


def _in_place(method: str) -> bool:
    """``add_``, ``index_fill_``: torch's in-place methods (one trailing underscore)."""
    return method.endswith("_") and not method.startswith("_") and not method.endswith("__")


def _body(node: ast.AST) -> list[ast.AST]:
    body = getattr(node, "body", [])
    return list(body) if isinstance(body, list) else [body]


def _bound_names(body: Sequence[ast.AST]) -> set[str]:
    out: set[str] = set()
    for node in walk_local(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.add(node.name)
    return out


def _mutations(body: Sequence[ast.AST]) -> Iterator[tuple[ast.expr, ast.AST]]:
    """(mutated container expression, statement or call) pairs in ``body``."""
    for node in walk_local(body):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete))
                       else [node.target])
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Subscript):
                        yield sub.value, node
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Attribute):
                yield node.target, node
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and (node.func.attr in _MUTATORS or _in_place(node.func.attr))):
            target = node.func.value
            while isinstance(target, ast.Subscript):  # cache[key].append(...)
                target = target.value
            yield target, node
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "next" and node.args):
            yield node.args[0], node  # advancing an iterator kept across calls
