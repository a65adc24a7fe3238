"""Per case: each generated input's recipe parameters as plain integers, and what stops them
being valid (a problem is hard when no valid input exists, soft when only realism suffers)."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

from ..models import Definition
from .constraints import ConstraintError, env_of, evaluate
from .roles import STRONG, Role


@dataclass(frozen=True)
class Problem:
    input: str
    why: str
    hard: bool
    axis: str | None = None
    """A var axis whose increase to ``need`` would fix it (held-out sizes get repaired)."""
    need: int = 0


def _axis_of(node: ast.expr | None, definition: Definition) -> str | None:
    if isinstance(node, ast.Name) and node.id in definition.var_axes:
        return node.id
    return None


def _value(node: ast.expr | None, env: dict[str, int]) -> int | None:
    if node is None:
        return None
    v = evaluate(node, env)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
        raise ConstraintError(f"{ast.unparse(node)} = {v!r} is not an integer")
    return int(v)


def resolve(definition: Definition, roles: dict[str, Role], axes: dict[str, int],  # noqa: C901 - one rule per role
            generated: set[str]) -> tuple[dict[str, dict[str, Any]], list[Problem]]:
    env = env_of(definition, axes)
    params: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for name in definition.inputs:
        if name not in generated:
            continue
        role, spec = roles[name], definition.inputs[name]
        if role.name in STRONG and role.bound is None:
            problems.append(Problem(name, f"has role {role.name!r} ({role.source}) but what it "
                                    "indexes or adds up to is unknown; name it: policy "
                                    f"correctness.input_roles {{{name!r}: "
                                    f"'{role.name}:<axis expression>'}}", True))
            continue
        shape = definition.resolve_shape(spec, axes) or ()
        numel = math.prod(shape) if spec.shape is not None else 1
        try:
            bound = _value(role.bound, env)
            unit = _value(role.unit, env)
        except (ConstraintError, KeyError, ZeroDivisionError) as exc:
            problems.append(Problem(name, f"its {role.name} bound cannot be evaluated: {exc}",
                                    True))
            continue
        axis = _axis_of(role.bound, definition)
        p: dict[str, Any] = {}
        if role.name == "indptr":
            p, more = _indptr(definition, roles, name, shape, total=bound, unit=unit, env=env)
            problems += more
        elif role.name in ("page", "slot", "sparse", "index"):
            p = {"high": bound if bound is not None else 0}
            last = shape[-1] if shape else 1
            if role.name == "sparse":
                p["pad"] = role.pad
                if not role.pad and last > p["high"]:
                    problems.append(Problem(name, f"needs {last} distinct indices per row in "
                                            f"[0, {p['high']}) and no -1 padding", True, axis,
                                            last))
            elif numel and p["high"] < 1:
                problems.append(Problem(name, f"indexes an empty range [0, {p['high']})", True,
                                        axis, 1))
            elif role.name == "slot" and numel > p["high"]:
                problems.append(Problem(name, f"needs {numel} distinct slots but only "
                                        f"{p['high']} exist", True, axis, numel))
            elif role.name == "page":
                p["unique"] = ("all" if numel <= p["high"] else "row" if last <= p["high"]
                               else "none")
                if numel > p["high"]:
                    problems.append(Problem(name, "pages repeat across rows", False, axis,
                                            numel))
        elif role.name in ("length", "top_k"):
            p = {"low": 1, "high": bound if bound is not None else 64}
            if p["high"] < 1:
                problems.append(Problem(name, f"its maximum {p['high']} is below 1", True, axis,
                                        1))
        elif role.name in ("const", "offset"):
            p = {"value": bound or 0}
        params[name] = p
    return params, problems


def _indptr(definition: Definition, roles: dict[str, Role], name: str, shape: tuple[int, ...],
            *, total: int | None, unit: int | None,
            env: dict[str, int]) -> tuple[dict[str, Any], list[Problem]]:
    role = roles[name]
    axis = _axis_of(role.bound, definition)
    if len(shape) != 1 or shape[0] < 1 or total is None or total < 0:
        return {}, [Problem(name, f"an indptr must be 1-D, non-empty and end at a total >= 0 "
                            f"(shape {list(shape)}, total {total})", True)]
    n = shape[0] - 1
    p: dict[str, Any] = {"total": total}
    problems = [] if total >= n else [Problem(name, "some segments are empty", False, axis, n)]
    if role.within:
        kv_role = roles[role.within]
        try:
            kv_total = _value(kv_role.bound, env)
        except (ConstraintError, KeyError, ZeroDivisionError):
            kv_total = None
        u = max(unit or 1, 1)
        if kv_total is not None and kv_total >= n and total <= (kv_total - n) * u + n:
            p.update(within=role.within, unit=u)
        else:
            need = n + -(-max(0, total - n) // u)
            problems.append(Problem(name, f"more queries than its {role.within} covers",
                                    False, _axis_of(kv_role.bound, definition), need))
    return p, problems
