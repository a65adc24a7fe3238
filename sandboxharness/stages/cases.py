"""Which concrete cases get run: workload-file cases plus held-out sizes, and their seeds.

Every input gets a role (``stages.roles``) and, per case, recipe parameters as plain integers
(``stages.inputplan``), so the worker makes inputs that are valid for what they mean. A case that
cannot be given valid inputs is bad input, raised here, before anything runs. Held-out sizes
are secret (drawn from the evaluation's seed, ``stages.heldout``); trials after the first draw
their inputs from held-out distributions (``inputs.dists``), named per trial seed in the payload.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..inputs import dists
from ..inputs.tensorgen import DTYPES, distribution
from ..models import Definition, Policy, WorkloadTrace
from ..models.workload import RandomInput, SafetensorsInput, ScalarInput
from . import constraints as cons
from . import heldout
from .inputplan import resolve
from .roles import Role, infer


@dataclass(frozen=True)
class Case:
    id: str
    workload: str
    """uuid of the workload it comes from."""
    axes: dict[str, int]
    heldout: bool
    payload: dict[str, Any]
    """JSON sent to the worker (see ``inputs.tensorgen.make_inputs``)."""

    def dist(self, seed: int) -> str:
        """The input distribution of the call with this trial seed (``plain`` by default)."""
        return distribution(self.payload, seed)


class CasePlan(list[Case]):
    """The cases to run, in order, and ``notes``: where coverage was reduced, and why."""

    def __init__(self, cases: list[Case] | None = None, notes: list[str] | None = None) -> None:
        super().__init__(cases or [])
        self.notes: list[str] = list(notes or [])


def derive_seed(root: int, *parts: object) -> int:
    h = hashlib.sha256(repr((root, *parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") >> 11  # 53 bits: exact in RFC 8785 canonical JSON


def trial_seed(root: int, case_id: str, trial: int) -> int:
    """Same derivation as ``execute.Plan.trial_seed`` (a unit test holds them together)."""
    return derive_seed(root, "trial", case_id, trial)


def satisfies(definition: Definition, axes: dict[str, int]) -> bool:
    """Whether ``axes`` meet the definition's axis constraints. Constraints outside the grammar
    are skipped here; ``build_cases`` refuses them as bad input before anything runs."""
    env = cons.env_of(definition, axes)
    for text in definition.constraints or []:
        try:
            (c,) = cons.parse(definition.model_copy(update={"constraints": [text]}))
        except InputError:
            continue
        try:
            if not cons.holds(c, env):
                return False
        except (cons.ConstraintError, KeyError):
            return False
    return True


def _payload(definition: Definition, axes: dict[str, int], inputs: dict[str, Any],
             roles: dict[str, Role] | None = None, params: dict[str, dict[str, Any]] | None = None,
             ) -> dict[str, Any]:
    ins = []
    act = False
    for name, spec in definition.inputs.items():
        shape = definition.resolve_shape(spec, axes)
        src = inputs.get(name)
        role = roles[name].name if roles else "data"
        item: dict[str, Any] = {
            "name": name, "dtype": spec.dtype, "shape": list(shape) if shape else None,
            "spec": src.model_dump(mode="json") if src is not None else None,
            "role": role, "params": (params or {}).get(name, {})}
        if not act and isinstance(src, RandomInput) and shape is not None and role == "data" \
                and spec.dtype in ("float16", "bfloat16", "float32", "float64"):
            item["act"] = act = True  # the activation: held-out distributions act on it
        ins.append(item)
    outs = [{"name": n, "dtype": s.dtype, "shape": list(definition.resolve_shape(s, axes) or ())}
            for n, s in definition.outputs.items()]
    return {"inputs": ins, "outputs": outs}


def _dists(payload: dict[str, Any], policy: Policy, seed: int, case_id: str) -> dict[str, str]:
    """Trial 0 stays plain; later trials take the distributions that change this case, in an
    order shuffled per case from the evaluation's seed (amplifying ones only where every float
    output is 16-bit: see ``inputs.dists.AMPLIFYING``)."""
    wide_out = any(o["dtype"] in ("float32", "float64") for o in payload["outputs"])
    live = [d for d in policy.correctness.distributions if d != "plain" and not (
        wide_out and d in dists.AMPLIFYING) and any(
        it["shape"] is not None and (it["spec"] or {}).get("type") == "random"
        and dists.applies(d, it, DTYPES[it["dtype"]]) for it in payload["inputs"])]
    if not live:
        return {}
    random.Random(derive_seed(seed, "dists", case_id)).shuffle(live)  # noqa: S311 - order only
    return {str(trial_seed(seed, case_id, t)): live[(t - 1) % len(live)]
            for t in range(1, policy.correctness.trials)}


def _check_inputs(definition: Definition, inputs: dict[str, Any], where: str) -> None:
    for name, spec in definition.inputs.items():
        src = inputs.get(name)
        if spec.dtype not in DTYPES and isinstance(src, RandomInput):
            raise InputError(f"{where}: input {name!r}: random {spec.dtype} inputs cannot be "
                             "generated (give it as a safetensors blob)", where=definition.name)
        if isinstance(src, ScalarInput) and spec.dtype.startswith(("int", "uint")) and (
                isinstance(src.value, float) and not float(src.value).is_integer()):
            raise InputError(f"{where}: scalar {name!r} is {spec.dtype} but its value is "
                             f"{src.value!r}", where=definition.name)


def _case(definition: Definition, policy: Policy, roles: dict[str, Role], *, cid: str, wl: str,
          axes: dict[str, int], held: bool, inputs: dict[str, Any], seed: int | None) -> Case:
    where = f"held-out size {axes}" if held else f"workload {wl}"
    _check_inputs(definition, inputs, where)
    generated = {n for n, s in inputs.items() if isinstance(s, RandomInput)}
    params, problems = resolve(definition, roles, axes, generated)
    hard = [p for p in problems if p.hard]
    if hard:
        raise InputError(f"{where}: input {hard[0].input!r} cannot be made valid: "
                         f"{hard[0].why}", where=definition.name)
    payload = _payload(definition, axes, inputs, roles, params)
    if seed is not None:
        payload["dists"] = _dists(payload, policy, seed, cid)
    return Case(cid, wl, dict(axes), held, payload)


def pick_workloads(workloads: list[WorkloadTrace], limit: int | None) -> list[WorkloadTrace]:
    """Every workload (``limit`` None), or a sample spread over the file by size: smallest,
    largest, and evenly between."""
    ordered = sorted(workloads, key=lambda w: sum(w.workload.axes.values()))
    if limit is None or len(ordered) <= limit:
        return ordered
    step = (len(ordered) - 1) / (limit - 1) if limit > 1 else 0
    return [ordered[round(i * step)] for i in range(limit)]


def build_cases(definition: Definition, workloads: list[WorkloadTrace], policy: Policy, *,
                seed: int | None = None) -> CasePlan:
    """Cases for one evaluation. ``seed`` (the evaluation's root seed, secret) draws the
    held-out sizes and each case's trial distributions; without it only the policy's fixed
    ``heldout_values`` are added and every trial is plain."""
    constraints = cons.parse(definition)
    roles = infer(definition, policy.correctness, constraints)
    notes = sorted({r.note for r in roles.values() if r.note})
    chosen = pick_workloads(workloads, policy.correctness.max_workloads)
    if len(chosen) < len(workloads):  # said in the verdict, never silently
        notes.append(f"sampled {len(chosen)} of the file's {len(workloads)} workloads "
                     f"(correctness.max_workloads: {policy.correctness.max_workloads})")
    cases = [_case(definition, policy, roles, cid=f"w{i}", wl=w.workload.uuid,
                   axes=dict(w.workload.axes),
                   held=False, inputs=dict(w.workload.inputs), seed=seed) for i, w in enumerate(chosen)]
    for w in chosen:
        env = cons.env_of(definition, dict(w.workload.axes))
        bad = [c.text for c in constraints if not _holds(c, env, w.workload.uuid, definition)]
        if bad:
            notes.append(f"workload {w.workload.uuid} violates constraint {bad[0]!r}")
    template = chosen[0].workload
    inputs: dict[str, Any] = {
        n: (s if isinstance(s, ScalarInput) else RandomInput(type="random"))
        for n, s in template.inputs.items()}
    for n, s in template.inputs.items():
        spec = definition.inputs.get(n)
        if isinstance(s, SafetensorsInput) and spec is not None and roles[n].name == "data" \
                and not DTYPES.get(spec.dtype, DTYPES["float32"]).is_floating_point:
            notes.append(f"input {n!r} comes from a blob and its role is unknown: held-out "
                         "sizes fill it with random integers in [0, 64)")
    seen = {tuple(sorted(w.workload.axes.items())) for w in workloads}
    held, more = heldout.draw(definition, workloads, policy.correctness, constraints=constraints,
                              roles=roles,
                              generated={n for n, s in inputs.items() if isinstance(s, RandomInput)},
                              seen=seen, seed=seed, seeder=derive_seed)
    notes += more
    for cid, axes in held:
        cases.append(_case(definition, policy, roles, cid=cid, wl=f"heldout:{cid}", axes=axes, held=True,
                           inputs=inputs, seed=seed))
    return CasePlan(cases, notes)


def _holds(c: cons.Constraint, env: dict[str, int], uuid: str, definition: Definition) -> bool:
    try:
        return cons.holds(c, env)
    except KeyError:
        return False
    except cons.ConstraintError as exc:  # on the workload's own sizes: the input is at fault
        raise InputError(f"workload {uuid}: constraint {c.text[:120]!r} cannot be evaluated: "
                         f"{exc}", where=definition.name) from None
