"""Checks on imports, names and attributes: module rebinding, introspection, torch compute."""

from __future__ import annotations

import ast
import re

from .base import CheckerBase
from .modmap import is_module_path
from .names import normalise
from .rules import ATTR_RULES

__all__ = ["ReferenceChecks"]

_SPECIAL_NAMES = {"__builtins__": "ast.dynamic-code", "__loader__": "ast.dynamic-code"}
# State Triton keeps on a jitted or autotuned kernel: what ran before, with which sizes.
_JIT_STATE = frozenset({"cache", "device_caches", "kernel_cache", "best_config",
                        "configs_timings", "bench_time", "cache_hook", "compiled_hook"})
# Attribute access by name: handed around as a value, it is access no rule can follow.
_ATTR_FUNCS = {"builtins.getattr", "builtins.setattr", "builtins.delattr",
               "operator.attrgetter", "operator.methodcaller"}
# What a non-torch solution may still use from torch: allocation, dtypes, metadata, devices.
_TORCH_GLUE = re.compile(
    r"^torch\.(empty|empty_like|empty_strided|zeros|zeros_like|ones|ones_like|full|full_like|"
    r"arange|tensor|as_tensor|from_numpy|is_tensor|is_floating_point|is_complex|numel|device|"
    r"dtype|layout|memory_format|Size|Tensor|finfo|iinfo|get_default_dtype|result_type|"
    r"promote_types|can_cast|broadcast_shapes|typename|no_grad|inference_mode|enable_grad|"
    r"set_grad_enabled|is_grad_enabled|float\d*|bfloat16|half|double|int\d*|uint\d*|bool|long|"
    r"short|complex\d*|cfloat|cdouble|float8_\w+|strided|sparse_coo|contiguous_format|"
    r"channels_last\w*|preserve_format|cuda|backends|version|__version__|utils|jit|compiler|"
    r"autograd|accelerator|get_device_module|Generator|types|nn\.(Module|Parameter|parameter)|"
    r"library|ops\.load_library)(\.|$)")


def _is_str(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


class ReferenceChecks(CheckerBase):
    """Every imported, named or dotted reference, matched against the rule tables; stores
    to attributes and namespaces of modules (monkeypatching)."""

    # -- imports -------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            name = normalise(a.name)
            if name == "builtins":
                self.report("ast.dynamic-code", node, "imports the builtins module")
            self.check_name(name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            mod = normalise(node.module)
            for a in node.names:
                self.check_name(mod if a.name == "*" else f"{mod}.{a.name}", node)

    # -- references ----------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _SPECIAL_NAMES:
            self.report(_SPECIAL_NAMES[node.id], node, f"{node.id}: namespace/loader access")
        if isinstance(node.ctx, ast.Load):
            resolved = self.names.resolve(node)
            for dotted in sorted(resolved):
                self.check_name(dotted, node)
            if resolved & _ATTR_FUNCS and id(node) not in self.called:
                self.report("ast.dynamic-code", node, f"{node.id} used as a value (passed or "
                            "stored): attribute access that cannot be followed")
            modules = sorted(resolved & self.names.module_paths)
            if modules and id(node) not in self.bases:
                self.report("ast.dynamic-code", node, f"module {modules[0]} used as a value "
                            "(passed, returned or stored): later uses cannot be checked")
            self.check_torch_compute(node, resolved)

    def check_torch_compute(self, node: ast.Name | ast.Attribute, resolved: set[str]) -> None:
        """Outermost names only: ``torch.nn`` inside ``torch.nn.Module`` is not a use."""
        if not self.forbid_torch_compute or id(node) in self.bases:
            return
        for dotted in sorted(resolved):
            if dotted.startswith("torch.") and not _TORCH_GLUE.match(dotted):
                self.report("ast.torch-compute", node, f"{dotted}: torch computes here, not "
                            "the kernel this solution claims to be")
                return

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.bases.add(id(node.value))  # before the value is visited (parents come first)
        if node.attr in ATTR_RULES:
            rule_id, what = ATTR_RULES[node.attr]
            self.report(rule_id, node, f".{node.attr}: {what}")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_store(node)
        else:
            if (isinstance(node.value, ast.Name) and node.attr in _JIT_STATE
                    and node.value.id in self.names.functions):
                self.report("ast.env-probe", node, f"{node.value.id}.{node.attr}: reads the "
                            "compile or tuning caches of a kernel (what ran before)")
            resolved = self.names.resolve(node)
            for dotted in sorted(resolved):
                self.check_name(dotted, node)
            self.check_torch_compute(node, resolved)
            self.check_module_escape(node, resolved)
        self.generic_visit(node)

    def check_module_escape(self, node: ast.Attribute, resolved: set[str]) -> None:
        """A module reached as an attribute (``torch.cuda``, ``np.os``) handed on as a value
        (an argument, a container element, a return value): later uses cannot be followed.
        Binding it to a plain name is followed (``F = torch.nn.functional`` is fine)."""
        if id(node) in self.bases or id(node) in self.called or (
                id(node) in self.names.alias_values):
            return
        modules = sorted(r for r in resolved if is_module_path(r))
        if modules:
            self.report("ast.dynamic-code", node, f"module {modules[0]} used as a value "
                        "(passed, returned or stored): later uses cannot be checked")

    def check_store(self, node: ast.Attribute) -> None:
        verb = "deletes" if isinstance(node.ctx, ast.Del) else "assigns"
        if node.attr == "__class__":
            self.report("ast.tensor-subclass", node, f"{verb} __class__ (object type swap)")
            return
        if node.attr in ("__code__", "__defaults__", "__kwdefaults__", "__globals__"):
            self.report("ast.monkeypatch", node, f"{verb} .{node.attr} (function body swap)")
            return
        base = self.derived(node.value)
        if base is None:
            return
        target = f"{base}.{node.attr}"
        if target.startswith("torch.backends."):
            self.report("ast.torch-config", node, f"{verb} {target}: process-wide torch flag")
        else:
            self.report("ast.monkeypatch", node, f"{verb} {target}: rebinds a module or "
                        "library attribute")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            v = node.value
            ns = None
            if isinstance(v, ast.Attribute) and v.attr == "__dict__":
                ns = self.derived(v.value)
            elif isinstance(v, ast.Call) and "builtins.vars" in self.names.resolve(v.func):
                ns = self.derived(v) or "vars(...)"
            if ns is not None:
                self.report("ast.monkeypatch", node, f"writes the namespace of {ns}")
        elif isinstance(node.ctx, ast.Load):
            self.check_folded(node)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, (str, bytes)):
            self.check_string(node, node.value)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self.check_folded(node)
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self.check_folded(node)
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if _is_str(node.value):  # docstrings and bare strings do nothing
            return
        self.generic_visit(node)
