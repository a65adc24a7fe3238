"""Held-out sizes: valid for the definition, and secret, drawn per evaluation from its seed.

A fixed list in the shipped policy can be read by the candidate, which could then behave only
on those sizes. Sizes are drawn around and between the workload file's values (plus small edge
values), dependent axes are derived from the definition's equality constraints and from indptr
structure (an indptr over ``n`` sequences has ``n + 1`` entries), sizes are repaired where an
input role needs room (distinct slots, distinct pages, queries covered by their kv), and every
axis constraint must hold. ``correctness.heldout_values`` are always tried as well.
"""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from ..models import Definition, WorkloadTrace
from ..models.policy import CorrectnessRules
from .constraints import Constraint, ConstraintError, env_of, evaluate, holds
from .inputplan import Problem, resolve
from .roles import Role

ATTEMPTS = 64
REPAIRS = 4
MAX_GROWTH = 4.0
"""No held-out case has more input+output elements than this times the file's largest (the
per-axis ``heldout_growth`` binds first on real workload files; this on tiny ones)."""
Seeder = Callable[..., int]


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def derivations(definition: Definition, constraints: list[Constraint],
                roles: dict[str, Role], workloads: list[WorkloadTrace]) -> dict[str, ast.expr]:
    """Var axes that follow from others: ``a == expr`` constraints, then indptr lengths."""
    var = set(definition.var_axes)
    derived: dict[str, ast.expr] = {}
    for c in constraints:
        t = c.tree
        if c.data or not (isinstance(t, ast.Compare) and len(t.ops) == 1
                          and isinstance(t.ops[0], ast.Eq)):
            continue
        for lhs, rhs in ((t.left, t.comparators[0]), (t.comparators[0], t.left)):
            if isinstance(lhs, ast.Name) and lhs.id in var and lhs.id not in derived \
                    and lhs.id not in _names(rhs):
                derived[lhs.id] = rhs
                break
    for name, role in roles.items():
        shape = definition.inputs[name].shape
        if role.name != "indptr" or not shape or len(shape) != 1:
            continue
        length = shape[0]
        if length not in var or length in derived:
            continue
        counts = [a for a in definition.var_axes if a != length and a not in derived and all(
            a in w.workload.axes and w.workload.axes.get(length) == w.workload.axes[a] + 1
            for w in workloads)]
        if len(counts) == 1:  # the one axis that counts this indptr's segments
            derived[length] = ast.BinOp(ast.Name(id=counts[0], ctx=ast.Load()), ast.Add(),
                                        ast.Constant(1))
    return derived


def complete(definition: Definition, free: dict[str, int], derived: dict[str, ast.expr],
             ) -> dict[str, int] | None:
    """Free axes plus the derived ones (in dependency order); None if they cannot be made."""
    axes = dict(free)
    pending = dict(derived)
    while pending:
        ready = [a for a, e in pending.items() if _names(e) <= set(axes) | {
            n for n, ax in definition.axes.items() if ax.type == "const"}]
        if not ready:
            return None  # a cycle: the constraints will judge
        for a in ready:
            try:
                v = evaluate(pending.pop(a), env_of(definition, axes))
            except (ConstraintError, KeyError, ZeroDivisionError):
                return None
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
                return None
            axes[a] = int(v)
    return axes


def elements(definition: Definition, axes: dict[str, int]) -> int:
    """Elements of every input and output at these sizes (0 if an axis is missing)."""
    specs = [*definition.inputs.values(), *definition.outputs.values()]
    try:
        return sum(math.prod(definition.resolve_shape(s, axes) or ()) for s in specs)
    except KeyError:
        return 0


@dataclass
class Drawer:
    definition: Definition
    constraints: list[Constraint]
    roles: dict[str, Role]
    generated: set[str]
    derived: dict[str, ast.expr]
    values: dict[str, list[int]]
    rules: CorrectnessRules
    max_elems: int

    def _pick(self, rng: random.Random, axis: str, small: float) -> int:
        vals = self.values[axis]
        upper = max(vals[-1] + 8, math.ceil(vals[-1] * self.rules.heldout_growth))
        if rng.random() < small:
            return rng.randint(1, min(8, upper))
        low = vals[0] if rng.random() < 0.5 else 1
        return min(upper, max(1, round(math.exp(rng.uniform(math.log(low),
                                                            math.log(upper + 1))))))

    def finish(self, free: dict[str, int], rng: random.Random,
               ) -> tuple[dict[str, int] | None, str]:
        """Derive, repair for input roles, check; (axes, '') or (None, why not)."""
        axes: dict[str, int] = {}
        problems: list[Problem] = []
        for _ in range(REPAIRS):
            got = complete(self.definition, free, self.derived)
            if got is None:
                return None, "dependent axes cannot be derived"
            axes = got
            _, problems = resolve(self.definition, self.roles, axes, self.generated)
            fixes = [p for p in problems if p.axis in free and axes[p.axis] < p.need]
            if not fixes:
                break
            for p in fixes:
                free[str(p.axis)] = max(free[str(p.axis)], p.need + rng.randint(0, p.need // 4))
        if any(v < 1 for v in axes.values()):
            return None, "an axis would be below 1"
        hard = [p for p in problems if p.hard]
        if hard:
            return None, f"input {hard[0].input!r} {hard[0].why}"
        env = env_of(self.definition, axes)
        for c in self.constraints:
            try:
                ok = holds(c, env)
            except ConstraintError:
                ok = False
            if not ok:
                return None, f"violates constraint {c.text!r}"
        if elements(self.definition, axes) > self.max_elems:
            return None, f"over {MAX_GROWTH:g}x the elements of the workload file's largest case"
        return axes, ""

    def fixed(self, value: int, seen: set[tuple[tuple[str, int], ...]],
              ) -> tuple[dict[str, int] | None, str]:
        """Every free axis at ``value``; failing that, one axis at ``value`` and the others at
        the workload file's smallest."""
        tries = [{a: value for a in self.values}]
        if len(self.values) > 1:
            tries += [{b: value if b == a else v[0] for b, v in self.values.items()}
                      for a in self.values]
        first = ""
        for free in tries:
            axes, why = self.finish(free, random.Random(value))  # noqa: S311
            if axes is not None and tuple(sorted(axes.items())) not in seen:
                return axes, ""
            first = first or why or "already covered"
        return None, first

    def secret(self, rng: random.Random, first: bool) -> tuple[dict[str, int] | None, str]:
        free = {a: self._pick(rng, a, 0.5 if first else 0.15) for a in self.values}
        return self.finish(free, rng)


def draw(definition: Definition, workloads: list[WorkloadTrace], rules: CorrectnessRules,
         *, constraints: list[Constraint], roles: dict[str, Role], generated: set[str],
         seen: set[tuple[tuple[str, int], ...]], seed: int | None,
         seeder: Seeder) -> tuple[list[tuple[str, dict[str, int]]], list[str]]:
    """(case id, axes) per held-out size, and notes where coverage was reduced."""
    var = definition.var_axes
    if not var:
        return [], []
    derived = derivations(definition, constraints, roles, workloads)
    values = {a: sorted({w.workload.axes[a] for w in workloads if a in w.workload.axes})
              for a in var if a not in derived}
    if not all(values.values()):
        missing = [a for a, v in values.items() if not v]
        return [], [f"held-out sizes: none, the workload file gives no value for {missing}"]
    biggest = max(elements(definition, dict(w.workload.axes)) for w in workloads)
    drawer = Drawer(definition, constraints, roles, generated, derived, values, rules,
                    int(biggest * MAX_GROWTH) + 1)
    out: list[tuple[str, dict[str, int]]] = []
    notes: list[str] = []

    def accept(cid: str, axes: dict[str, int]) -> bool:
        key = tuple(sorted(axes.items()))
        if key in seen:
            return False
        seen.add(key)
        out.append((cid, axes))
        return True

    for v in rules.heldout_values:
        axes, why = drawer.fixed(v, seen)
        if axes is not None:
            accept(f"h{v}", axes)
        elif why != "already covered":
            notes.append(f"held-out value {v}: skipped, {why}")
    if seed is None:
        return out, notes
    for k in range(rules.heldout_count):
        why = ""
        for attempt in range(ATTEMPTS):
            # the secret is the evaluation's seed (hashed per draw); the PRNG only spreads it
            rng = random.Random(seeder(seed, "heldout", k, attempt))  # noqa: S311
            axes, why = drawer.secret(rng, first=k == 0)
            if axes is not None and accept(f"s{k}", axes):
                break
        else:
            notes.append(f"secret held-out size {k + 1} of {rules.heldout_count}: none valid "
                         f"in {ATTEMPTS} draws (last: {why or 'already covered'})")
    return out, notes
