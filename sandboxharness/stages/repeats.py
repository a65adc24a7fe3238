"""Many samples of one call's inputs, for stochastic outputs (FlashInfer-Bench's sampling
evaluator needs thousands per row to judge the distribution).

The first correctness trial of a sampler case becomes a ``sample`` request: the worker makes
the call as usual (bound at once), then calls the candidate again ``calls`` times on the batch
tiled ``tile`` times along its first axis, and saves the stacked samples as
``rep.<output>`` ``[calls * tile, *shape]`` beside the first call's results.
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..models import Definition, Policy
from ..worker.protocol import Repeat
from .cases import Case
from .compare_modes import resolve
from .sampling import _NEEDS, thresholding

MAX_ROWS_PER_CALL = 2048
"""Rows of a tiled call: a bounded batch, however many samples per row are asked for (and a
short call, so the time budget is kept to within about one call)."""


def sample_request(definition: Definition, case: Case, policy: Policy) -> Repeat | None:
    """How a ``sample`` request repeats this case's call, or None (not a sampler)."""
    resolved = resolve(definition, policy.correctness)
    outs = case.payload["outputs"]
    if not outs or resolved.modes.get(outs[0]["name"]) != "sampling":
        return None
    method = thresholding(definition)
    needs = ["probs", *_NEEDS.get(method, [])]
    missing = [n for n in needs if n not in definition.inputs]
    if missing:  # before anything runs, not after the candidate did
        raise InputError(f"sampling comparison ({method}) needs the input(s) {missing}, as "
                         "FlashInfer-Bench's sampling evaluator does", where=definition.name)
    shape = outs[0].get("shape") or []
    if not shape:
        return None
    batch = int(shape[0])
    want = resolved.sampling.samples_per_row
    tile = max(1, min(want, MAX_ROWS_PER_CALL // max(batch, 1)))
    calls = math.ceil(want / tile)
    tiled = [it["name"] for it in case.payload["inputs"]
             if isinstance(it.get("shape"), list) and it["shape"] and it["shape"][0] == batch]
    tiled_outputs = [{**o, "shape": [int(o["shape"][0]) * tile, *o["shape"][1:]]}
                     if o.get("shape") and o["shape"][0] == batch else o for o in outs]
    return Repeat(tile=tile, calls=calls, tile_inputs=tiled,
                  budget_s=min(resolved.sampling.budget_s, policy.limits.run_timeout_s / 4),
                  tiled_case={"inputs": case.payload["inputs"], "outputs": tiled_outputs})
