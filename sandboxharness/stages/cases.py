"""Which concrete cases get run: workload-file cases plus held-out sizes, and their seeds."""

from __future__ import annotations

import ast
import hashlib
import operator
from dataclasses import dataclass
from typing import Any

from ..models import Definition, Policy, WorkloadTrace
from ..models.workload import RandomInput, SafetensorsInput, ScalarInput


@dataclass(frozen=True)
class Case:
    id: str
    workload: str
    """uuid of the workload it comes from."""
    axes: dict[str, int]
    heldout: bool
    payload: dict[str, Any]
    """JSON sent to the worker (see ``worker.tensorgen.make_inputs``)."""


def derive_seed(root: int, *parts: object) -> int:
    h = hashlib.sha256(repr((root, *parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") >> 11  # 53 bits: exact in RFC 8785 canonical JSON


_OPS: dict[type, Any] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
    ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}


def _safe_eval(node: ast.AST, env: dict[str, int]) -> Any:
    """Arithmetic/comparison only: definition constraints are input, never ``eval``-ed."""
    if isinstance(node, ast.Expression):
        return _safe_eval(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_safe_eval(node.left, env), _safe_eval(node.right, env))
    if isinstance(node, ast.BoolOp):
        vals = [_safe_eval(v, env) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = _safe_eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _safe_eval(comp, env)
            if type(op) not in _OPS or not _OPS[type(op)](left, right):
                return False
            left = right
        return True
    raise ValueError("unsupported expression")


def satisfies(definition: Definition, axes: dict[str, int]) -> bool:
    env = {n: a.value for n, a in definition.axes.items() if a.type == "const"}
    env.update(axes)
    for text in definition.constraints or []:
        try:
            if not _safe_eval(ast.parse(text, mode="eval"), env):
                return False
        except (ValueError, KeyError, SyntaxError, ZeroDivisionError, TypeError):
            continue  # a constraint we cannot evaluate does not veto a case
    return True


def _payload(definition: Definition, axes: dict[str, int],
             inputs: dict[str, Any]) -> dict[str, Any]:
    ins = []
    for name, spec in definition.inputs.items():
        shape = definition.resolve_shape(spec, axes)
        src = inputs.get(name)
        ins.append({"name": name, "dtype": spec.dtype, "shape": list(shape) if shape else None,
                    "spec": src.model_dump(mode="json") if src is not None else None})
    outs = [{"name": n, "dtype": s.dtype, "shape": list(definition.resolve_shape(s, axes) or ())}
            for n, s in definition.outputs.items()]
    return {"inputs": ins, "outputs": outs}


def pick_workloads(workloads: list[WorkloadTrace], limit: int) -> list[WorkloadTrace]:
    """Spread over the file by size: smallest, largest-that-fits, and evenly between."""
    ordered = sorted(workloads, key=lambda w: sum(w.workload.axes.values()))
    if len(ordered) <= limit:
        return ordered
    step = (len(ordered) - 1) / (limit - 1) if limit > 1 else 0
    return [ordered[round(i * step)] for i in range(limit)]


def build_cases(definition: Definition, workloads: list[WorkloadTrace],
                policy: Policy) -> list[Case]:
    chosen = pick_workloads(workloads, policy.correctness.max_workloads)
    cases = [Case(f"w{i}", w.workload.uuid, dict(w.workload.axes), False,
                  _payload(definition, w.workload.axes, dict(w.workload.inputs)))
             for i, w in enumerate(chosen)]
    seen = {tuple(sorted(w.workload.axes.items())) for w in workloads}
    template = chosen[0].workload
    if definition.var_axes and not any(
        isinstance(s, SafetensorsInput) for s in template.inputs.values()
    ):
        for value in policy.correctness.heldout_values:
            axes = {a: value for a in definition.var_axes}
            key = tuple(sorted(axes.items()))
            if key in seen or not satisfies(definition, axes):
                continue
            seen.add(key)
            inputs: dict[str, Any] = {
                n: (s if isinstance(s, ScalarInput) else RandomInput(type="random"))
                for n, s in template.inputs.items()
            }
            cases.append(Case(f"h{value}", f"heldout:{value}", axes, True,
                              _payload(definition, axes, inputs)))
    return cases
