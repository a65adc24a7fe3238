"""A kernel's profile signature: what Nsight Compute measured and the bottleneck it implies.

:class:`KernelMetrics` is the parsed evidence (every metric optional: an architecture or ncu
version may lack one); :func:`classify` adds the bottleneck class and limiter and returns the
:class:`Signature` recorded in a verdict, archived, and handed to generators per regime.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints

from ..models._base import FiniteModel, Label
from .classify import Bottleneck, ClassInput, classify_metrics

Pct = Annotated[float, Field(ge=0.0, le=1000.0)]
"""A share of peak in percent (ncu may report slightly over 100 on some counters)."""
Count = Annotated[int, Field(ge=0, le=2**62)]


def _printable(v: str) -> str:
    if not v.isprintable():
        raise ValueError("must not contain control characters")
    return v


KernelName = Annotated[str, StringConstraints(min_length=1, max_length=512),
                       AfterValidator(_printable)]
"""Demangled kernel names are long; the cap keeps one well under any record's size."""


class KernelMetrics(FiniteModel):
    """One kernel's measured metrics (the slowest instance of the dominant kernel)."""

    kernel: KernelName
    """The dominant kernel's name (most GPU time within the profiled call)."""
    duration_us: Annotated[float, Field(ge=0.0)]
    """GPU duration of that kernel instance, microseconds."""
    sm_throughput_pct: Pct | None = None
    """Compute (SM) throughput, % of peak (ncu ``sm__throughput``)."""
    mem_throughput_pct: Pct | None = None
    """Memory throughput, % of peak (ncu ``gpu__compute_memory_throughput``)."""
    dram_throughput_pct: Pct | None = None
    """DRAM throughput alone, % of peak (ncu ``dram__throughput``)."""
    registers_per_thread: Count | None = None
    dyn_smem_per_block: Count | None = None
    """Dynamic shared memory per block, bytes."""
    theoretical_occupancy_pct: Pct | None = None
    achieved_occupancy_pct: Pct | None = None
    occupancy_limiter: Label | None = None
    """What caps theoretical occupancy: registers, shared_mem, warps, blocks (or None)."""
    waves_per_sm: Annotated[float, Field(ge=0.0)] | None = None
    l2_hit_pct: Pct | None = None
    dram_bytes: Count | None = None
    """DRAM bytes read plus written by the kernel."""
    grid_size: Count | None = None
    """Blocks in the grid."""
    block_size: Count | None = None
    """Threads per block."""
    sm_count: Count | None = None
    """SMs on the device (a grid smaller than this leaves SMs idle)."""
    kernel_count: Annotated[int, Field(ge=1, le=2**31)] = 1
    """Kernel launches in the profiled call (a call of many short kernels is launch-bound)."""
    total_duration_us: Annotated[float, Field(ge=0.0)] | None = None
    """Sum of every profiled kernel's duration within the call, microseconds."""


class Signature(KernelMetrics):
    """:class:`KernelMetrics` with the bottleneck class and limiter they imply."""

    bottleneck: Bottleneck
    """compute, memory, latency or launch (rules and thresholds: :mod:`.classify`)."""
    limiter: Label
    """A short stable token naming what limits the kernel within its class."""


def classify(metrics: KernelMetrics) -> Signature:
    """The :class:`Signature` of ``metrics``: bottleneck and limiter by :mod:`.classify`'s rules."""
    bottleneck, limiter = classify_metrics(ClassInput(
        duration_us=metrics.duration_us,
        sm_throughput_pct=metrics.sm_throughput_pct,
        mem_throughput_pct=metrics.mem_throughput_pct,
        dram_throughput_pct=metrics.dram_throughput_pct,
        achieved_occupancy_pct=metrics.achieved_occupancy_pct,
        theoretical_occupancy_pct=metrics.theoretical_occupancy_pct,
        occupancy_limiter=metrics.occupancy_limiter,
        waves_per_sm=metrics.waves_per_sm,
        l2_hit_pct=metrics.l2_hit_pct,
        kernel_count=metrics.kernel_count,
    ))
    return Signature(**metrics.model_dump(exclude_unset=True),
                     bottleneck=bottleneck, limiter=limiter)


__all__ = ["Bottleneck", "KernelMetrics", "Signature", "classify"]
