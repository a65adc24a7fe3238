"""Workload input spec -> tensors, deterministically from a seed.

Shared by both sides: the worker makes a trial's inputs itself (fresh values, fresh
addresses every call) and the host regenerates exactly the same ones to check them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
for _name, _attr in (("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2")):
    if hasattr(torch, _attr):
        DTYPES[_name] = getattr(torch, _attr)


def _random(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).to(torch.bool)
    if not dtype.is_floating_point:
        return torch.randint(0, 64, shape, generator=gen).to(dtype)
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)


def make_inputs(case: dict[str, Any], seed: int, device: str, data_dir: str) -> list[Any]:
    """Inputs in definition order. ``case`` is the JSON the host sends:

    ``{"inputs": [{"name", "dtype", "shape": [..] | None, "spec": {workload input} | None}]}``
    """
    gen = torch.Generator().manual_seed(seed)
    values: list[Any] = []
    for item in case["inputs"]:
        spec = item.get("spec")
        if spec is None:
            values.append(None)  # optional input the workload leaves out
            continue
        kind = spec["type"]
        if kind == "scalar":
            values.append(spec["value"])
            continue
        dtype = DTYPES[item["dtype"]]
        if kind == "safetensors":
            from safetensors.torch import load_file

            tensors = load_file(str(Path(data_dir) / spec["path"]))
            values.append(tensors[spec["tensor_key"]].to(device=device, dtype=dtype).contiguous())
            continue
        if item["shape"] is None:
            values.append(float(torch.randn((), generator=gen)))
            continue
        values.append(_random(tuple(item["shape"]), dtype, gen).to(device))
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
