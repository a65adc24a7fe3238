"""Name resolution: what each name in a module refers to, through imports and aliases.

Shared with the import policy checks. Resolution is flow-insensitive and over-approximates:
a name bound to ``os`` anywhere in the module may be ``os`` everywhere.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["BUILTIN_NAMES", "ImportRef", "PythonNames", "normalise"]

_ALIASED_MODULES = {  # C-level twins of public modules
    "posix": "os", "nt": "os", "_io": "io", "_socket": "socket", "_signal": "signal",
    "_posixsubprocess": "subprocess", "_pickle": "pickle", "_ctypes": "ctypes",
    "_multiprocessing": "multiprocessing", "_asyncio": "asyncio", "_imp": "importlib",
    "_frozen_importlib": "importlib", "_frozen_importlib_external": "importlib",
    "_thread": "threading", "_ssl": "ssl", "_gc": "gc", "_warnings": "warnings",
    "__builtin__": "builtins", "_functools": "functools", "_tracemalloc": "tracemalloc",
    "_lsprof": "cProfile", "_codecs": "codecs", "_operator": "operator",
}
BUILTIN_NAMES = frozenset(dir(builtins))
_MAX_ALIASES = 32


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
        self.bindings: dict[str, set[str]] = {}
        self.star_modules: list[str] = []
        self.imports: list[ImportRef] = []
        self.module_paths: set[str] = set()
        """Dotted names bound by ``import x`` / ``import x.y as z``: certainly modules."""
        self._collect_imports()
        self._collect_aliases()
        self._collect_dynamic_imports()

    def _bind(self, name: str, targets: Iterable[str]) -> bool:
        cur = self.bindings.setdefault(name, set())
        before = len(cur)
        for t in sorted(targets):  # sorted: which aliases fit under the cap must not vary by run
            if len(cur) >= _MAX_ALIASES:
                break
            cur.add(t)
        return len(cur) != before

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
        pairs: list[tuple[ast.expr, ast.expr]] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                pairs.extend((t, node.value) for t in node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                pairs.append((node.target, node.value))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = node.args
                pos = a.posonlyargs + a.args
                pairs.extend((ast.Name(id=arg.arg), d)
                             for arg, d in zip(pos[len(pos) - len(a.defaults):], a.defaults,
                                               strict=True))
                pairs.extend((ast.Name(id=arg.arg), d)
                             for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                             if d is not None)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                pairs.extend((i.optional_vars, i.context_expr) for i in node.items
                             if i.optional_vars is not None)
        for _ in range(8):  # to a fixpoint: aliases of aliases
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
            return False
        if isinstance(target, ast.Name):
            res = self.resolve(value)
            return self._bind(target.id, res) if res else False
        return False

    def _collect_dynamic_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.args:
                first = node.args[0]
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                if {"importlib.import_module", "builtins.__import__"} & self.resolve(node.func):
                    self.imports.append(ImportRef(first.value.lstrip("."), None, 0, node.lineno,
                                                  dynamic=True))

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
            return {f"{r}.{expr.attr}" for r in self.resolve(expr.value)}
        if isinstance(expr, ast.Call):
            return self._resolve_call(expr)
        if isinstance(expr, ast.Subscript):  # sys.modules["os"]
            key = expr.slice
            if (isinstance(key, ast.Constant) and isinstance(key.value, str)
                    and "sys.modules" in self.resolve(expr.value)):
                return {normalise(key.value)}
        return set()

    def _resolve_call(self, call: ast.Call) -> set[str]:
        func = self.resolve(call.func)
        first = call.args[0] if call.args else None
        literal = (first.value if isinstance(first, ast.Constant) and isinstance(first.value, str)
                   else None)
        if "builtins.getattr" in func and first is not None and len(call.args) >= 2:
            name = call.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                return {f"{r}.{name.value}" for r in self.resolve(first)}
        if literal and func & {"importlib.import_module", "builtins.__import__"}:
            return {normalise(literal.lstrip("."))}
        if any(f.startswith("pathlib.") for f in func):  # a Path object
            return {"pathlib.Path"}
        return set()

    def references(self) -> Iterator[tuple[str, int]]:
        """Every resolved, import-rooted dotted name used in the module, with its line."""
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                for dotted in self.resolve(node):
                    if not dotted.startswith("builtins"):
                        yield dotted, node.lineno
