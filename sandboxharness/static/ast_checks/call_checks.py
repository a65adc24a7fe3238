"""Checks on calls: opening files, attributes named at run time, setattr patches, suppress()."""

from __future__ import annotations

import ast
import re

from .base import CheckerBase
from .rules import ATTR_RULES

__all__ = ["CallChecks"]

_OPEN_FUNCS = {"builtins.open", "io.open", "os.fdopen", "codecs.open", "io.open_code",
               "tokenize.open", "gzip.open", "bz2.open", "lzma.open"}
_PATHLIB_OPEN = re.compile(r"^pathlib\.(\w+\.)*open$")


class CallChecks(CheckerBase):
    """What a call does beyond naming its function (the name itself is a reference)."""

    def visit_Call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        func = self.names.resolve(node.func)
        if node.args and func & {"builtins.getattr", "builtins.hasattr", "builtins.setattr",
                                 "builtins.delattr"}:
            self.bases.add(id(node.args[0]))
        if func & _OPEN_FUNCS or any(_PATHLIB_OPEN.match(f) for f in func):
            self.check_open(node, func)
        if func & {"builtins.getattr", "builtins.setattr", "builtins.delattr",
                   "builtins.hasattr"}:
            self.check_attr_call(node, func)
        fname = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if fname in ("__setattr__", "__delattr__") and isinstance(node.func, ast.Attribute):
            recv = node.func.value
            unbound = self.names.resolve(recv) & {"builtins.object", "builtins.type"}
            target = node.args[0] if unbound and node.args else recv
            base = self.derived(target)
            if base is not None:
                self.report("ast.monkeypatch", node, f"{fname} on {base}")
        if "builtins.type" in func and len(node.args) == 3:
            self.report("ast.dynamic-code", node, "type(name, bases, dict) builds a class at "
                        "run time")
        if func & {"builtins.getattr", "importlib.import_module", "builtins.__import__"}:
            for dotted in sorted(self.names.resolve(node)):
                self.check_name(dotted, node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "join":
            self.check_folded(node)  # "".join(["__glo", "bals__"])
        if "contextlib.suppress" in func and any(self.is_broad(a) for a in node.args):
            self.report("ast.swallowed-exception", node,
                        "contextlib.suppress(Exception) silences every error")
        self.generic_visit(node)

    def check_open(self, node: ast.Call, func: set[str]) -> None:
        at = 0 if any(f.startswith("pathlib.") for f in func) else 1
        mode: ast.expr | None = node.args[at] if len(node.args) > at else None
        for kw in node.keywords:
            if kw.arg == "mode":
                mode = kw.value
            elif kw.arg is None:  # **kwargs: the mode is unknown
                mode = kw.value
        if mode is None:
            self.report("ast.file-read", node, "open(): reads a file")
        elif isinstance(mode, ast.Constant) and isinstance(mode.value, str):
            if set(mode.value) & set("wax+"):
                self.report("ast.file-write", node, f"open(mode={mode.value!r}): writes a file")
            else:
                self.report("ast.file-read", node, "open(): reads a file")
        else:
            self.report("ast.file-write", node, "open() with a computed mode: may write")

    def check_attr_call(self, node: ast.Call, func: set[str]) -> None:
        if len(node.args) < 2:
            return
        obj, name = node.args[0], node.args[1]
        base = self.derived(obj)
        attr = self.names.literal(name)
        if attr is not None:
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                self.report("ast.dynamic-code", node, f"attribute name {attr!r} assembled "
                            "from pieces (hides what is accessed)")
            if attr in ATTR_RULES:
                rule_id, what = ATTR_RULES[attr]
                self.report(rule_id, node, f"{attr!r}: {what}")
            if func & {"builtins.setattr", "builtins.delattr"}:
                if attr == "__class__":
                    self.report("ast.tensor-subclass", node, "setattr(..., '__class__', ...)")
                elif base is not None:
                    self.report("ast.monkeypatch", node, f"setattr/delattr on {base}.{attr}")
        elif base is not None:
            self.report("ast.dynamic-code", node, f"attribute name computed at run time on "
                        f"{base}")
            if func & {"builtins.setattr", "builtins.delattr"}:
                self.report("ast.monkeypatch", node, f"setattr/delattr on {base} with a "
                            "computed name")
        elif func & {"builtins.setattr", "builtins.delattr"}:
            self.report("ast.monkeypatch", node, "setattr/delattr with a computed name")
