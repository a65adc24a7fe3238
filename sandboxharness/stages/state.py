"""Inputs after the call: state the operator updates, and everything else, which must not move.

Which inputs are state is learned from the reference (it ran on the same inputs, in its own
process, and saved its post-call inputs): an input the reference itself changed is state, and
the candidate's post-call value must match the reference's (the output tolerance). An input the
definition declares as updated in place (a ``state:<name>`` / ``inplace:<name>`` tag, an input
description saying so, or the policy's ``state_inputs``) that the reference leaves alone may be
left alone or hold the value of its paired output (``q`` -> ``q_out``). Every other input must
stay bit-identical: mutating inputs remains a rejected cheat.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..models import Definition
from ..models.verdict import ReasonCode
from .compare import Comparison, compare
from .compare_modes import Resolved
from .session import KernelFault


@dataclass(frozen=True)
class InputDigests:
    """Per-input digests (``in.<name>``) of one call: as the reference made them (``ref_pre``;
    the reference is trusted), and after the reference's call and the candidate's."""

    ref_pre: dict[str, str]
    ref: dict[str, str]
    cand: dict[str, str]

_DECLARED = re.compile(r"\b(in[- ]place|mutated|updated in place)\b", re.IGNORECASE)
_UPDATED = re.compile(r"\b(in[- ]place|mutated|updated)\b", re.IGNORECASE)


def _pairs(output: str, inp: str) -> bool:
    return (output.startswith(f"{inp}_") or output.endswith(f"_{inp}")
            or output in (f"new_{inp}", f"updated_{inp}"))


def declared_state(definition: Definition, resolved: Resolved) -> set[str]:
    names = set(resolved.state_inputs)
    for tag in definition.tags:
        key, _, value = tag.partition(":")
        if key in ("state", "inplace") and value in definition.inputs:
            names.add(value)
    for name, spec in definition.inputs.items():
        if spec.description and _DECLARED.search(spec.description):
            names.add(name)
    # an output said to be updated in place, named after an input (q -> q_out, state -> new_state)
    for out, spec in definition.outputs.items():
        text = f"{spec.description or ''} {definition.description or ''}"
        if _UPDATED.search(spec.description or "") or _DECLARED.search(text):
            names.update(n for n in definition.inputs if _pairs(out, n))
    return names


def _paired_output(definition: Definition, name: str, after: torch.Tensor,
                   ref_out: dict[str, torch.Tensor]) -> str | None:
    same = [o for o, t in ref_out.items() if t.shape == after.shape and t.dtype == after.dtype]
    named = [o for o in same if _pairs(o, name)]
    pick = named if named else same
    return pick[0] if len(pick) == 1 else None


def check_inputs(definition: Definition, resolved: Resolved, payload_inputs: list[dict[str, Any]],
                 *, digests: InputDigests, got: dict[str, torch.Tensor],
                 ref_got: dict[str, torch.Tensor],
                 original: Callable[[], list[object]]) -> tuple[Comparison | None, list[str]]:
    """(the first failure or None, the inputs judged as state). Inputs are told apart by
    digest: each one's as the reference made it, after the reference's call and after the
    candidate's; only an input that moved travels as bytes (``got``/``ref_got``), and the
    original is made again on this side (``original``) only where a state input was left as
    it was."""
    declared = declared_state(definition, resolved)
    ref_out = {k.removeprefix("out."): v for k, v in ref_got.items() if k.startswith("out.")}
    state: list[str] = []
    for index, item in enumerate(payload_inputs):
        name = item["name"]
        key = f"in.{name}"
        made = digests.ref_pre.get(key)
        if made is None:
            continue  # not a tensor: nothing a call can change
        cand_moved = digests.cand.get(key) != made
        ref_moved = digests.ref.get(key) != made
        if ref_moved or name in declared:
            state.append(name)
        after = got.get(key)
        if cand_moved and after is None:  # an honest worker saves every input that moved
            return Comparison(ReasonCode.INPUT_MUTATED,
                              f"input {name!r} after the call is not the input the harness "
                              "made, and its worker did not save it"), state
        made_value = original()[index] if cand_moved else None  # rare: only a moved input
        if isinstance(made_value, torch.Tensor) and after is not None and (
                after.shape != made_value.shape or after.dtype != made_value.dtype):
            return Comparison(ReasonCode.INPUT_MUTATED,
                              f"input {name!r} was replaced or resized by the call"), state
        if ref_moved:  # state: must end where the reference's did
            ref_after = ref_got.get(key)
            if ref_after is None:
                raise KernelFault(ReasonCode.WORKER_PROTOCOL,
                                  f"the reference changed input {name!r} but did not save it")
            value = after if after is not None else original()[index]
            if not isinstance(value, torch.Tensor):
                raise KernelFault(ReasonCode.WORKER_PROTOCOL, f"input {name!r} is not a tensor")
            tol = resolved.tolerance_for(item["dtype"])
            res = compare(key, value, ref_after, tol, resolved.required_matched_ratio)
            if res.code is not None:
                detail = res.message.split(": ", 1)[-1]
                return Comparison(res.code, f"state input {name!r} after the call differs from "
                                  f"the reference's (which updates it): {detail}"), state
            continue
        if not cand_moved or after is None:
            continue
        pair = _paired_output(definition, name, after, ref_out) if name in declared else None
        if pair is not None:
            tol = resolved.tolerance_for(item["dtype"])
            res = compare(key, after, ref_out[pair], tol, resolved.required_matched_ratio)
            if res.code is None:
                continue  # updated in place to its output's value, as declared
        return Comparison(ReasonCode.INPUT_MUTATED, f"input {name!r} was modified by the call"
                          + (" (declared in place, but it matches neither its original value "
                             "nor its output's)" if name in declared else "")), state
    return None, state


def may_update_inputs(definition: Definition, resolved: Resolved, ref_calls: list[Any]) -> bool:
    """Timed calls only carry one digest over all inputs, so they cannot tell a state update
    from a cheat: for a definition with state (declared, or updated by the reference's own
    timed calls, ``ref_calls``: objects with ``pre_in`` and ``bound``), the input check of timed
    calls is left to the sampled re-checks, which judge input by input (``check_inputs``)."""
    if declared_state(definition, resolved):
        return True
    return any(getattr(c, "pre_in", "") and c.bound.get("in") not in (None, c.pre_in)
               for c in ref_calls)
