"""What each input means (its role) and what it is bounded by, inferred once per definition.

Order of authority: the definition names it (a tag ``input_role:<input>=<spec>`` or
``[role: <spec>]`` in the input's description), then the policy (``correctness.input_roles``,
a glob on the input name), then the built-in table below (name, dtype, description, the other
inputs and the constraints). A spec is ``role`` or ``role:<axis expression>`` (the bound:
the range an index lies in, the total an indptr ends at, the largest length).
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass

from ..errors import InputError
from ..inputs.recipes import ROLES
from ..models import Definition
from ..models.definition import TensorSpec
from ..models.policy import CorrectnessRules
from .constraints import Constraint, ConstraintError, axis_expression

STRONG = {"indptr", "page", "slot", "sparse"}
"""Roles that cannot be made valid without their bound: no bound is bad input."""


@dataclass(frozen=True)
class Role:
    name: str
    bound: ast.expr | None = None
    source: str = "inferred"
    within: str | None = None
    """indptr only: the indptr whose segments cap this one's (queries within their kv)."""
    unit: ast.expr | None = None
    """Tokens per segment unit of ``within`` (the page size for a paged kv)."""
    pad: bool = False
    """sparse: -1 padding allowed (the definition says so)."""
    note: str | None = None


_INT = [
    (r"indptr|cu_seq_?lens|seq_start|query_start_loc|_offsets$", "indptr"),
    (r"slot|state_batch_ind|state_ind|cache_ind|pool_ind|state_idx", "slot"),
    (r"block_table|page_table|kv_indices|page_ind|page_ids", "page"),
    (r"sparse_ind|topk_ind|top_k_ind", "sparse"),
    (r"position|pos_ids", "index"),
    (r"last_page_len|seq_?lens?$|_lens?$|lengths?$|context_lens", "length"),
    (r"^top_?k$|^k$", "top_k"),
    (r"offset", "offset"),
    (r"^(is|use|enable)_", "flag"),
    (r"(^|_)(indices|index|ids?|idx)$", "index"),
]
_FLOAT = [
    (r"^probs?$|_probs$|probabilities", "probs"),
    (r"routing|router|gating", "routing"),
    (r"logits", "logits"),
    (r"uniform|^u$|random", "uniform"),
    (r"temperature|^temp$", "temperature"),
    (r"top_?p$|min_p", "top_p"),
    (r"^eps$|epsilon|_eps$", "eps"),
    (r"scale|scaling|factor", "scale"),
    (r"weight|^w$|gamma", "weight"),
    (r"bias$", "bias"),
]


def parse_spec(definition: Definition, text: str, where: str) -> Role:
    name, _, expr = text.partition(":")
    name = name.strip()
    if name not in ROLES:
        raise InputError(f"{where}: unknown input role {name!r} (known: {sorted(ROLES)})",
                         where=definition.name)
    bound = None
    if expr.strip():
        try:
            bound = axis_expression(definition, expr.strip())
        except ConstraintError as exc:
            raise InputError(f"{where}: role bound {expr.strip()!r}: {exc}",
                             where=definition.name) from None
    return Role(name, bound, source=where)


def _explicit(definition: Definition, rules: CorrectnessRules) -> dict[str, Role]:
    out: dict[str, Role] = {}
    for tag in definition.tags:
        key, _, value = tag.partition(":")
        if key == "input_role" and "=" in value:
            inp, _, spec = value.partition("=")
            if inp in definition.inputs:
                out[inp] = parse_spec(definition, spec, f"tag {tag!r}")
    for inp, tspec in definition.inputs.items():
        m = re.search(r"\[role:\s*([^\]]+)\]", tspec.description or "")
        if m and inp not in out:
            out[inp] = parse_spec(definition, m.group(1), f"inputs.{inp}.description")
    for inp in definition.inputs:
        if inp in out:
            continue
        for pattern, spec_text in rules.input_roles.items():
            if fnmatch.fnmatchcase(inp, pattern) or fnmatch.fnmatchcase(
                    f"{definition.name}/{inp}", pattern):
                out[inp] = parse_spec(definition, spec_text, f"policy input_roles[{pattern!r}]")
                break
    return out


def _by_table(name: str, spec: TensorSpec) -> str:
    low = name.lower()
    if spec.dtype == "bool":
        return "mask"
    if "packed" in (spec.description or "").lower():
        return "data"
    table = _FLOAT if spec.dtype.startswith(("float", "bfloat")) else _INT
    for pattern, role in table:
        if re.search(pattern, low):
            return role
    return "data"


def _first_dim(definition: Definition, name: str | None) -> str | None:
    spec = definition.inputs.get(name or "")
    return spec.shape[0] if spec is not None and spec.shape else None


def _name(axis: str | None) -> ast.expr | None:
    return ast.Name(id=axis, ctx=ast.Load()) if axis else None


def _find(definition: Definition, skip: str, words: tuple[str, ...], ndim: int = 2) -> str | None:
    for other, spec in definition.inputs.items():
        if other != skip and spec.shape and len(spec.shape) >= ndim and any(
                w in other.lower() for w in words):
            return other
    return None


def _axis_like(definition: Definition, pattern: str) -> str | None:
    return next((a for a in definition.axes if re.search(pattern, a)), None)


def _indptr(definition: Definition, name: str, ends: dict[str, ast.expr]) -> Role:
    if name in ends:
        return Role("indptr", ends[name])
    low = name.lower()
    prefix = low.removesuffix("indptr").rstrip("_")
    for other in definition.inputs:
        if prefix and other.lower() == f"{prefix}_indices":
            return Role("indptr", _name(_first_dim(definition, other)))
    kv = any(k in low for k in ("kv", "_k", "key"))
    pool = ("k", "key") if kv else ("q", "query", "x", "hidden_states", "input", "a")
    target = next((p for p in pool if p in definition.inputs), None)
    return Role("indptr", _name(_first_dim(definition, target)))


def _bound(definition: Definition, name: str, role: str, ends: dict[str, ast.expr]) -> Role:
    spec = definition.inputs[name]
    if role == "indptr":
        return _indptr(definition, name, ends)
    if role in ("page", "sparse"):
        cache = _find(definition, name, ("cache", "pool", "pages"))
        dims = definition.inputs[cache].shape if cache else None
        if not dims:
            return Role(role, _name(_axis_like(definition, r"num_(pages|blocks)")))
        bound: ast.expr = ast.Name(id=dims[0], ctx=ast.Load())
        if role == "sparse" and len(dims) > 1 and "page" in dims[1]:  # token-level indices
            bound = ast.BinOp(bound, ast.Mult(), ast.Name(id=dims[1], ctx=ast.Load()))
        text = (spec.description or "").lower()
        return Role(role, bound, pad=role == "sparse" and ("-1" in text or "padding" in text))
    if role == "slot":
        state = _find(definition, name, ("state",))
        axis = _first_dim(definition, state) or _axis_like(definition, r"pool|slots|cache_size")
        return Role(role, _name(axis))
    if role == "index":
        table = _find(definition, name, ("cos_sin", "freqs", "rope", "cos"))
        axis = _first_dim(definition, table) or _axis_like(definition, r"max_(seq|pos)")
        if axis is None:
            return Role("data", note=f"input {name!r} looks like an index but what it indexes "
                        "is unknown: random integers in [0, 64) (name it in the policy's "
                        "correctness.input_roles)")
        return Role(role, _name(axis))
    if role == "length":
        page = _axis_like(definition, r"page_size")
        table = _find(definition, name, ("block_table", "page_table"))
        if "last_page" in name and page:
            return Role(role, _name(page))
        if table and page and len(definition.inputs[table].shape or []) == 2:
            cols = (definition.inputs[table].shape or ["", ""])[1]
            return Role(role, ast.BinOp(ast.Name(id=cols, ctx=ast.Load()), ast.Mult(),
                                        ast.Name(id=page, ctx=ast.Load())))
        axis = _axis_like(definition, r"max_(seq|len|kv|context)")
        return Role(role, _name(axis), note=None if axis else (
            f"input {name!r} is a length with no known maximum: drawn in [1, 64]"))
    if role == "top_k":
        src = next((o for o, s in definition.inputs.items() if s.shape and _by_table(o, s) in
                    ("probs", "logits", "routing")), None)
        dims = definition.inputs[src].shape if src else None
        return Role(role, _name(dims[-1]) if dims else None)
    if role in ("const", "offset") or (spec.shape is None and name in definition.axes):
        return Role("const", _name(name) if name in definition.axes else None)
    return Role(role)


def infer(definition: Definition, rules: CorrectnessRules,
          constraints: list[Constraint]) -> dict[str, Role]:
    """Every input's role (a strong role whose bound is unknown is a problem only where the
    input has to be generated: ``inputplan.resolve``)."""
    ends = {c.ends[0]: c.ends[1] for c in constraints if c.ends}
    explicit = _explicit(definition, rules)
    out: dict[str, Role] = {}
    for name, spec in definition.inputs.items():
        if name in explicit:
            given = explicit[name]
            auto = _bound(definition, name, given.name, ends)
            out[name] = Role(given.name, given.bound or auto.bound, given.source, pad=auto.pad)
            continue
        role = "const" if spec.shape is None and name in definition.axes else _by_table(name,
                                                                                        spec)
        out[name] = _bound(definition, name, role, ends)
    _couple_queries(definition, out)
    return out


def _couple_queries(definition: Definition, roles: dict[str, Role]) -> None:
    """Queries are a suffix of their kv sequence: cap each query segment by its kv segment."""
    ptrs = [n for n, r in roles.items() if r.name == "indptr"]
    kv = next((n for n in ptrs if "kv" in n.lower() or n.lower().endswith("_k")), None)
    if kv is None:
        return
    paged = any(r.name == "page" for r in roles.values())
    unit = _name(_axis_like(definition, r"page_size")) if paged else None
    for q in ptrs:
        if q != kv and definition.inputs[q].shape == definition.inputs[kv].shape:
            r = roles[q]
            roles[q] = Role(r.name, r.bound, r.source, within=kv,
                            unit=unit or ast.Constant(1), pad=r.pad, note=r.note)
