"""Workload input spec -> tensors, deterministically from (case payload, seed).

Shared by both sides: the worker makes a trial's inputs itself (fresh values, fresh
addresses every call) and the host regenerates exactly the same ones to check them. Values are
always made on the CPU from a ``torch.Generator`` and only then moved, so CPU and CUDA agree.
Each input has its own generator (seeded from the trial seed and its position), so one input's
recipe never shifts another's values.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from . import dists, recipes

DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
for _name, _attr in (("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2")):
    if hasattr(torch, _attr):
        DTYPES[_name] = getattr(torch, _attr)


def _generator(seed: int, index: int) -> torch.Generator:
    digest = hashlib.sha256(f"{seed}/{index}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") >> 1)


def distribution(case: dict[str, Any], seed: int) -> str:
    """The held-out distribution a trial seed draws its inputs from (``plain`` when none)."""
    name = (case.get("dists") or {}).get(str(seed), "plain")
    return name if name in dists.DISTRIBUTIONS else "plain"


def make_inputs(case: dict[str, Any], seed: int, device: str, data_dir: str) -> list[Any]:
    """Inputs in definition order. ``case`` is the JSON the host sends:

    ``{"inputs": [{"name", "dtype", "shape": [..] | None, "spec": {workload input} | None,
    "role", "params", "act"}], "dists": {"<trial seed>": "<distribution>"}}``
    """
    dist = distribution(case, seed)
    items = case["inputs"]
    values: list[Any] = [None] * len(items)
    made: dict[str, torch.Tensor] = {}
    # inputs whose recipe reads another input (an indptr ``within`` another) come last
    order = sorted(range(len(items)), key=lambda i: bool((items[i].get("params") or {})
                                                         .get("within")))
    for i in order:
        item = items[i]
        spec = item.get("spec")
        if spec is None:
            continue  # optional input the workload leaves out
        kind = spec["type"]
        if kind == "scalar":
            values[i] = recipes.cast_scalar(spec["value"], str(item["dtype"]))
            continue
        dtype = DTYPES[item["dtype"]]
        if kind == "safetensors":
            from safetensors.torch import load_file

            tensors = load_file(str(Path(data_dir) / spec["path"]))
            values[i] = tensors[spec["tensor_key"]].to(device=device, dtype=dtype).contiguous()
            continue
        gen = _generator(seed, i)
        if item["shape"] is None:
            values[i] = recipes.make_scalar(item, gen)
            continue
        t = recipes.make_tensor(item, tuple(item["shape"]), dtype, gen, made)
        dists.apply(dist, item, t, gen)
        made[str(item["name"])] = t
        values[i] = t.to(device)
    return values


def make_outputs(case: dict[str, Any], device: str) -> list[torch.Tensor]:
    """Destination buffers pre-filled with poison so an unwritten output can never pass."""
    outs = []
    for item in case["outputs"]:
        dtype = DTYPES[item["dtype"]]
        t = torch.empty(tuple(item["shape"]), dtype=dtype, device=device)
        if dtype.is_floating_point:
            t.fill_(float("nan"))
        elif dtype == torch.bool:
            t.fill_(True)
        else:
            t.fill_(torch.iinfo(dtype).min)
        outs.append(t)
    return outs
