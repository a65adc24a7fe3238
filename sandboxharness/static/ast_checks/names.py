"""Name resolution: what each name in a module refers to, through imports and aliases.

Shared with the import policy checks. Resolution is flow-insensitive and over-approximates:
a name bound to ``os`` anywhere in the module may be ``os`` everywhere. Aliases are followed
through assignments (plain, annotated, walrus, tuple unpacking), ``for`` and comprehension
targets, ``with ... as``, default arguments, arguments at call sites of the file's own
functions and what those functions return; containers are transparent (``[torch.cuda][0]``
is ``torch.cuda``); names built from constant pieces are folded (``getattr(torch, "cu" +
"da")``); and a module reached through another (``os.sys``, ``np.os``) is read as itself.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .aliases import Function, alias_pairs, own_functions
from .constants import UNKNOWN, ModuleConstants
from .modmap import via_module
from .walk import walk_local

__all__ = ["BUILTIN_NAMES", "ImportRef", "PythonNames", "normalise"]

_ALIASED_MODULES = {  # C-level twins of public modules
    "posix": "os", "nt": "os", "_io": "io", "_socket": "socket", "_signal": "signal",
    "_posixsubprocess": "subprocess", "_pickle": "pickle", "_ctypes": "ctypes",
    "_multiprocessing": "multiprocessing", "_asyncio": "asyncio", "_imp": "importlib",
    "_frozen_importlib": "importlib", "_frozen_importlib_external": "importlib",
    "_thread": "threading", "_ssl": "ssl", "_gc": "gc", "_warnings": "warnings",
    "__builtin__": "builtins", "_functools": "functools", "_tracemalloc": "tracemalloc",
    "_lsprof": "cProfile", "_codecs": "codecs", "_operator": "operator", "_weakref": "weakref",
    "_weakrefset": "weakref", "_mmap": "mmap", "_atexit": "atexit", "_psutil_linux": "psutil",
}
BUILTIN_NAMES = frozenset(dir(builtins))
_MAX_ALIASES = 32
_IMPORTERS = frozenset({"importlib.import_module", "builtins.__import__"})


def normalise(dotted: str) -> str:
    """``posix.system`` -> ``os.system``: C-level twins are checked as their public module."""
    head, _, rest = dotted.partition(".")
    head = _ALIASED_MODULES.get(head, head)
    return f"{head}.{rest}" if rest else head


@dataclass(frozen=True)
class ImportRef:
    module: str
    """Dotted module, without leading dots for relative imports."""
    name: str | None
    """For ``from module import name``; ``None`` for ``import module``."""
    level: int
    """0 for absolute imports; the number of leading dots otherwise."""
    line: int
    dynamic: bool = False
    """``importlib.import_module("x")`` or ``__import__("x")`` with a literal name."""


class PythonNames:
    """What names in one module refer to, flow-insensitively (an over-approximation)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.consts = ModuleConstants(tree)
        self.bindings: dict[str, set[str]] = {}
        self.star_modules: list[str] = []
        self.imports: list[ImportRef] = []
        self.module_paths: set[str] = set()
        """Dotted names bound by ``import x`` / ``import x.y as z``: certainly modules."""
        self.functions: dict[str, list[Function]] = {}
        """The file's own functions (and lambdas bound to a name), by name."""
        self.alias_values: set[int] = set()
        """Expressions bound to a plain name (tracked here, so no escape of a module)."""
        self._active: set[str] = set()
        self._version = 0
        self._ret_cache: dict[str, tuple[int, set[str]]] = {}
        self._collect_imports()
        self.functions = own_functions(tree)
        self._collect_aliases()
        self._collect_dynamic_imports()

    def _bind(self, name: str, targets: Iterable[str]) -> bool:
        cur = self.bindings.setdefault(name, set())
        before = len(cur)
        for t in sorted(targets):  # sorted: which aliases fit under the cap must not vary by run
            if len(cur) >= _MAX_ALIASES:
                break
            cur.add(t)
        if len(cur) != before:
            self._version += 1
            return True
        return False

    def _collect_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imports.append(ImportRef(a.name, None, 0, node.lineno))
                    target = normalise(a.name if a.asname else a.name.split(".")[0])
                    self._bind(a.asname or a.name.split(".")[0], [target])
                    self.module_paths.add(target)
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                base = ("." * node.level + mod) if node.level else normalise(mod)
                for a in node.names:
                    self.imports.append(ImportRef(mod, a.name, node.level, node.lineno))
                    if a.name == "*":
                        self.star_modules.append(base)
                    else:
                        full = f"{base}.{a.name}" if base and not base.endswith(".") else (
                            base + a.name)
                        self._bind(a.asname or a.name, [full])

    def _collect_aliases(self) -> None:
        pairs = alias_pairs(self.tree, self.functions, set(self.bindings), self.alias_values)
        for _ in range(12):  # to a fixpoint: aliases of aliases (bounded: cost)
            changed = False
            for target, value in pairs:
                changed |= self._bind_pair(target, value)
            if not changed:
                break

    def _bind_pair(self, target: ast.expr, value: ast.expr) -> bool:
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                changed = False
                for t, v in zip(target.elts, value.elts, strict=True):
                    changed |= self._bind_pair(t, v)
                return changed
            changed = False  # unknown shape: every name may be any part of the value
            for t in target.elts:
                changed |= self._bind_pair(t.value if isinstance(t, ast.Starred) else t, value)
            return changed
        if isinstance(target, ast.Name):
            res = self.resolve(value)
            return self._bind(target.id, res) if res else False
        return False

    def _collect_dynamic_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.args:
                name = self.literal(node.args[0])
                if name is not None and _IMPORTERS & self.resolve(node.func):
                    self.imports.append(ImportRef(name.lstrip("."), None, 0, node.lineno,
                                                  dynamic=True))

    def literal(self, expr: ast.expr | None) -> str | None:
        """The string ``expr`` folds to (a literal, a constant or pieces of them), else None."""
        value = self.consts.fold(expr)
        return value if isinstance(value, str) and value is not UNKNOWN else None

    def resolve(self, expr: ast.expr) -> set[str]:
        """Dotted names ``expr`` may refer to (empty: nothing module-derived)."""
        if isinstance(expr, ast.Name):
            out = set(self.bindings.get(expr.id, ()))
            if expr.id == "__builtins__":
                out.add("builtins")
            elif expr.id in BUILTIN_NAMES:
                out.add(f"builtins.{expr.id}")
            elif not out:
                out.update(f"{m}.{expr.id}" for m in self.star_modules)
            return out
        if isinstance(expr, ast.Attribute):
            return _member(self.resolve(expr.value), expr.attr)
        if isinstance(expr, ast.Call):
            return self._resolve_call(expr)
        if isinstance(expr, ast.Subscript):
            return self._resolve_subscript(expr)
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(self.resolve(e) for e in expr.elts))
        if isinstance(expr, ast.Dict):
            return set().union(*(self.resolve(v) for v in expr.values))
        if isinstance(expr, ast.IfExp):
            return self.resolve(expr.body) | self.resolve(expr.orelse)
        if isinstance(expr, ast.BoolOp):
            return set().union(*(self.resolve(v) for v in expr.values))
        if isinstance(expr, (ast.NamedExpr, ast.Starred, ast.Await)):
            return self.resolve(expr.value)
        return set()

    def _resolve_subscript(self, expr: ast.Subscript) -> set[str]:
        key = self.literal(expr.slice)
        value = expr.value
        if key is not None:
            if "sys.modules" in self.resolve(value):  # sys.modules["os"]
                return {normalise(key)}
            ns = self.namespace_of(value)
            if ns:  # torch.cuda.__dict__["synchronize"], vars(torch)["cuda"]
                return _member(ns, key)
        return self.resolve(value)  # containers are transparent

    def namespace_of(self, expr: ast.expr) -> set[str]:
        """``X.__dict__`` or ``vars(X)``: what ``X`` resolves to; empty otherwise."""
        if isinstance(expr, ast.Attribute) and expr.attr == "__dict__":
            return self.resolve(expr.value)
        if (isinstance(expr, ast.Call) and expr.args
                and "builtins.vars" in self.resolve(expr.func)):
            return self.resolve(expr.args[0])
        return set()

    def _resolve_call(self, call: ast.Call) -> set[str]:
        func = self.resolve(call.func)
        first = call.args[0] if call.args else None
        if "builtins.getattr" in func and first is not None and len(call.args) >= 2:
            name = self.literal(call.args[1])
            default = self.resolve(call.args[2]) if len(call.args) > 2 else set()
            if name is not None:
                return _member(self.resolve(first), name) | default
            return default
        if isinstance(call.func, ast.Attribute) and call.func.attr == "get" and call.args:
            key, ns = self.literal(call.args[0]), self.namespace_of(call.func.value)
            if key is not None and ns:  # vars(torch).get("cuda")
                return _member(ns, key)
        literal = self.literal(first)
        if literal and func & _IMPORTERS:
            return {normalise(literal.lstrip("."))}
        if any(f.startswith("pathlib.") for f in func):  # a Path object
            return {"pathlib.Path"}
        if isinstance(call.func, ast.Lambda):
            return self.resolve(call.func.body)
        if isinstance(call.func, ast.Name) and not func:
            return self._returns(call.func.id)
        return set()

    def _returns(self, name: str) -> set[str]:
        """What the file's own function ``name`` may return (modules, library objects)."""
        if name in self._active or name not in self.functions:
            return set()
        cached = self._ret_cache.get(name)
        if cached is not None and cached[0] == self._version:
            return cached[1]
        self._active.add(name)
        try:
            out: set[str] = set()
            for fn in self.functions[name]:
                if isinstance(fn, ast.Lambda):
                    out |= self.resolve(fn.body)
                    continue
                for node in walk_local(fn.body):
                    if isinstance(node, ast.Return) and node.value is not None:
                        out |= self.resolve(node.value)
            if not self._active - {name}:  # only complete answers are kept
                self._ret_cache[name] = (self._version, out)
            return out
        finally:
            self._active.discard(name)

    def references(self) -> Iterator[tuple[str, int]]:
        """Every resolved, import-rooted dotted name used in the module, with its line."""
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                for dotted in self.resolve(node):
                    if not dotted.startswith("builtins"):
                        yield dotted, node.lineno
            elif isinstance(node, (ast.Subscript, ast.Call)):
                # names only reached through a namespace or a folded getattr
                if isinstance(node, ast.Subscript) and not self.namespace_of(node.value):
                    continue
                if isinstance(node, ast.Call) and not self._is_lookup(node):
                    continue
                for dotted in self.resolve(node):
                    if not dotted.startswith("builtins"):
                        yield dotted, node.lineno

    def _is_lookup(self, call: ast.Call) -> bool:
        func = self.resolve(call.func)
        return bool(func & ({"builtins.getattr"} | _IMPORTERS)) or (
            isinstance(call.func, ast.Attribute) and call.func.attr == "get"
            and bool(self.namespace_of(call.func.value)))


def _member(bases: set[str], attr: str) -> set[str]:
    """``attr`` of each of ``bases``, also read through a module it passes (``os.sys``)."""
    out = set()
    for r in bases:
        full = f"{r}.{attr}"
        out.add(full)
        out.update(via_module(full))
    return out
