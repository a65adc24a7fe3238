"""From parsed ncu rows to one signature per profiled call.

The worker opens every profiled call with a marker kernel (:data:`.metrics.MARKER_KERNEL`),
so the rows between two markers are one call's kernels. Within a call the *dominant* kernel
is the name with the most GPU time; its slowest launch gives the metrics (the state the
contest harness's signature describes: "slowest instance per kernel").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from . import metrics as m
from .ncu_parse import KernelRow, NcuParseError
from .signature import KernelMetrics, Signature, classify


def split_calls(rows: list[KernelRow], calls: int) -> list[list[KernelRow]]:
    """``calls`` lists of rows, one per profiled call, in order.

    Rows before the first marker belong to no call. Without any marker a single call takes
    every row; more calls and no markers cannot be told apart (an error).
    """
    marks = [i for i, r in enumerate(rows) if m.MARKER_KERNEL in r.name]
    if not marks:
        if calls == 1:
            return [list(rows)]
        raise NcuParseError(f"{calls} calls profiled but no call marker in the report")
    if len(marks) > calls:
        raise NcuParseError(f"{len(marks)} call markers in the report, {calls} calls made")
    bounds = [*marks, len(rows)]
    out = [rows[a + 1:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    return out + [[] for _ in range(calls - len(out))]  # a launch cap reached: nothing left


def _int(v: float | None) -> int | None:
    return None if v is None else int(round(v))


def _occupancy_limiter(row: KernelRow) -> str | None:
    """The resource allowing the fewest blocks per SM, when occupancy is below 100 %."""
    limits = {k: row.metrics[name] for k, name in m.OCC_LIMITS.items() if name in row.metrics}
    theoretical = row.metrics.get(m.THEORETICAL_OCC)
    if not limits or (theoretical is not None and theoretical >= 99.5):
        return None
    return min(limits, key=lambda k: limits[k])  # dict order breaks ties: registers first


def summarize(rows: list[KernelRow]) -> KernelMetrics | None:
    """The call's :class:`KernelMetrics` (None: no kernel with a duration was profiled)."""
    timed = [r for r in rows if m.DURATION in r.metrics]
    if not timed:
        return None
    total: dict[str, float] = {}
    for r in timed:
        total[r.name] = total.get(r.name, 0.0) + r.metrics[m.DURATION]
    dominant = max(total, key=lambda k: total[k])
    row = max((r for r in timed if r.name == dominant), key=lambda r: r.metrics[m.DURATION])
    get = row.metrics.get
    read, write = get(m.DRAM_READ), get(m.DRAM_WRITE)
    dram = None if read is None and write is None else (read or 0.0) + (write or 0.0)
    try:
        return KernelMetrics(
            kernel=row.name, duration_us=row.metrics[m.DURATION] / 1e3,
            sm_throughput_pct=get(m.SM_PCT), mem_throughput_pct=get(m.MEM_PCT),
            dram_throughput_pct=get(m.DRAM_PCT),
            registers_per_thread=_int(get(m.REGISTERS)),
            dyn_smem_per_block=_int(get(m.DYN_SMEM)),
            theoretical_occupancy_pct=get(m.THEORETICAL_OCC),
            achieved_occupancy_pct=get(m.ACHIEVED_OCC),
            occupancy_limiter=_occupancy_limiter(row), waves_per_sm=get(m.WAVES),
            l2_hit_pct=get(m.L2_HIT), dram_bytes=_int(dram), grid_size=_int(get(m.GRID)),
            block_size=_int(get(m.BLOCK)), sm_count=_int(get(m.SM_COUNT)),
            kernel_count=len(rows), total_duration_us=sum(total.values()) / 1e3)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise NcuParseError(f"kernel {row.name[:80]!r}: {where}: {first['msg']}") from None


def signatures(rows: list[KernelRow], calls: int) -> list[Signature | None]:
    """One signature per profiled call (None where the call's kernels were not profiled)."""
    out: list[Signature | None] = []
    for segment in split_calls(rows, calls):
        found = summarize(segment)
        out.append(None if found is None else classify(found))
    return out


def regime_signatures(details: Mapping[str, Any]) -> dict[str, Signature | None]:
    """The signatures a profile stage recorded (its ``StageResult.details``), by regime name:
    what the loop reads back from a verdict. Empty for a profile that did not run."""
    out: dict[str, Signature | None] = {}
    for entry in details.get("signatures") or []:
        raw = entry.get("signature")
        out[str(entry.get("regime"))] = None if raw is None else Signature.model_validate(raw)
    return out
