"""Roofline position of a timed workload: bytes and FLOPs per call from the definition, against
ceilings measured on this device (trusted side, the harness's own process, once per process).

bytes = every input and output tensor read or written once (the fewest a kernel can move);
FLOPs from ``op_type`` where a formula is known, else unknown. The ceilings are a big
device-to-device copy (bytes read + written over time) and a bf16 ``torch.matmul``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ...models import Definition

_DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
                "float8_e5m2": 1, "float4_e2m1": 0.5, "int64": 8, "int32": 4, "int16": 2,
                "int8": 1, "uint8": 1, "bool": 1}


def _numel(shape: list[int] | None) -> int:
    n = 1
    for d in shape or []:
        n *= int(d)
    return n


def bytes_per_call(payload: dict[str, Any]) -> int:
    total = 0.0
    for item in payload["inputs"] + payload["outputs"]:
        if item.get("shape") is None:
            continue
        total += _numel(item["shape"]) * _DTYPE_BYTES.get(item["dtype"], 4)
    return int(total)


def _axes(definition: Definition, axes: dict[str, int]) -> dict[str, int]:
    out = {n: a.value for n, a in definition.axes.items() if a.type == "const"}
    out.update(axes)
    return out


def flops_per_call(definition: Definition, axes: dict[str, int],
                   payload: dict[str, Any]) -> tuple[float | None, str]:
    """(FLOPs, formula) for the op types we know; (None, why) otherwise."""
    op = definition.op_type.lower()
    ax = _axes(definition, axes)
    out_elems = sum(_numel(o["shape"]) for o in payload["outputs"])
    if op == "gemm" and {"M", "N", "K"} <= set(ax):
        return 2.0 * ax["M"] * ax["N"] * ax["K"], "2*M*N*K"
    if op in ("rmsnorm", "fused_add_rmsnorm"):
        per = 4 if op == "rmsnorm" else 5
        return float(per * out_elems), f"{per}*elements"
    if op in ("activation", "silu_and_mul"):
        return 5.0 * out_elems, "5*output elements (silu + mul)"
    if op == "softmax":
        return 5.0 * out_elems, "5*elements (max, sub, exp, sum, div)"
    if op in ("axpy", "elementwise"):
        return 2.0 * out_elems, "2*elements"
    return None, f"unknown for op_type {definition.op_type!r}"


def _median_ms(fn: Callable[[], Any], reps: int, warmup: int = 2) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(statistics.median(times))


def _copy_ms(n: int) -> float:
    import torch

    a = torch.empty(n, dtype=torch.float32, device="cuda").normal_()
    b = torch.empty_like(a)
    return _median_ms(lambda: b.copy_(a), 10)


def _matmul_ms(m: int) -> float:
    import torch

    x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    return _median_ms(lambda: torch.matmul(x, y), 10, warmup=3)


@lru_cache(maxsize=1)
def ceilings() -> dict[str, Any]:
    """Measured once per process: copy bandwidth, bf16 matmul rate, and the timer's floor."""
    import torch

    from ...worker.gputimer import GpuTimer

    n = 1 << 28  # 1 GiB of float32 read + 1 GiB written
    copy_ms = _copy_ms(n)
    m = 8192
    mm_ms = _matmul_ms(m)
    timer = GpuTimer()  # what an empty call costs with the stage's own method
    floor = statistics.median(timer.time_calls([lambda: None] * 20)[1])
    method = timer.method
    del timer
    torch.cuda.empty_cache()
    return {"copy_bandwidth_Bps": 2 * n * 4 / (copy_ms / 1e3),
            "bf16_matmul_flops": 2 * m**3 / (mm_ms / 1e3),
            "timer_floor_ms": floor * 1e3, "timer_method": method,
            "method": "median of 10: 1 GiB D2D copy (read+write); 8192^3 bf16 matmul; "
                      "empty call timed like a candidate call (timer_floor_ms)"}


def position(definition: Definition, axes: dict[str, int], payload: dict[str, Any],
             median_ms: float, ceil: dict[str, Any]) -> dict[str, Any]:
    nbytes = bytes_per_call(payload)
    flops, formula = flops_per_call(definition, axes, payload)
    t_mem = nbytes / ceil["copy_bandwidth_Bps"] * 1e3
    t_math = flops / ceil["bf16_matmul_flops"] * 1e3 if flops is not None else None
    floor_ms = max(t_mem, t_math or 0.0)
    out: dict[str, Any] = {
        "bytes": nbytes, "flops": flops, "flops_formula": formula,
        "achieved_GBps": nbytes / (median_ms / 1e3) / 1e9 if median_ms > 0 else None,
        "achieved_TFLOPs": (flops / (median_ms / 1e3) / 1e12) if flops and median_ms > 0
        else None,
        "bound": "memory" if t_math is None or t_mem >= t_math else "compute",
        "speed_of_light_ms": floor_ms,
        "pct_of_speed_of_light": 100.0 * floor_ms / median_ms if median_ms > 0 else None,
    }
    if flops:
        out["intensity_flop_per_byte"] = flops / max(nbytes, 1)
    return out


def bound_is_strict(definition: Definition, payload: dict[str, Any]) -> bool:
    """Every input and output byte must be touched: no integer (index, offset, length) or
    blob inputs, which let a kernel read only part of a tensor."""
    for item in payload["inputs"]:
        spec = item.get("spec") or {}
        if spec.get("type") == "safetensors":
            return False
        if item.get("shape") is not None and not (
                item["dtype"].startswith(("float", "bfloat"))):
            return False
    return True


def implausible(definition: Definition, payload: dict[str, Any], median_ms: float,
                ceil: dict[str, Any], margin: float | None) -> str | None:
    """Why a measured time cannot be real (faster than the bytes it must move allow), or None."""
    if margin is None or median_ms <= 0 or not bound_is_strict(definition, payload):
        return None
    t_mem = bytes_per_call(payload) / ceil["copy_bandwidth_Bps"] * 1e3
    if median_ms < margin * t_mem:
        return (f"median {median_ms:.4f} ms is under {margin:.0%} of the {t_mem:.4f} ms its "
                f"{bytes_per_call(payload)} bytes take at the measured copy bandwidth")
    return None
