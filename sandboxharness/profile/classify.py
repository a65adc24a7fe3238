"""Bottleneck class and limiter from a kernel's metrics: pure arithmetic, no I/O.

The rules follow Nsight Compute's own speed-of-light reading (the "SOL" section): a unit at a
high share of its peak is what holds the kernel back; when neither the SM nor memory is busy,
the kernel waits (latency) or is too short for the GPU to matter (launch). Thresholds are
module constants so a reviewer sees every number that decides a class:

==========================  =====  ==========================================================
constant                    value  why
==========================  =====  ==========================================================
``LAUNCH_MAX_US``             5.0  a kernel under ~5 us is dominated by its launch (a launch
                                   costs ~2-5 us of host and front-end time on recent GPUs)
``LAUNCH_MAX_WAVES``         0.25  ...or its grid fills under a quarter of one wave: the GPU
                                   idles, so the fixed cost of the launch dominates
``BUSY_PCT``                 60.0  SOL share above which a unit counts as the bottleneck
                                   (ncu's own rule marks >= 60 % as "well utilised")
``DOMINANT_MARGIN_PCT``      10.0  when both units are busy, the higher one wins only by this
                                   margin; closer than that, the higher still names the class
                                   but the limiter says "balanced"
``LOW_OCCUPANCY_PCT``        25.0  achieved occupancy under this leaves too few warps to hide
                                   latency: the limiter names occupancy (and what caps it)
==========================  =====  ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Bottleneck = Literal["compute", "memory", "latency", "launch"]
BOTTLENECKS: tuple[Bottleneck, ...] = ("compute", "memory", "latency", "launch")

LAUNCH_MAX_US = 5.0
LAUNCH_MAX_WAVES = 0.25
BUSY_PCT = 60.0
DOMINANT_MARGIN_PCT = 10.0
LOW_OCCUPANCY_PCT = 25.0


@dataclass(frozen=True)
class ClassInput:
    """What :func:`classify_metrics` reads (every field may be unknown except the duration)."""

    duration_us: float
    sm_throughput_pct: float | None = None
    mem_throughput_pct: float | None = None
    dram_throughput_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    occupancy_limiter: str | None = None
    waves_per_sm: float | None = None
    l2_hit_pct: float | None = None
    kernel_count: int = 1


def classify_metrics(m: ClassInput) -> tuple[Bottleneck, str]:
    """``(bottleneck, limiter)`` for one kernel; the limiter is a short stable token."""
    sm = m.sm_throughput_pct
    mem = m.mem_throughput_pct
    busiest = max((v for v in (sm, mem) if v is not None), default=None)
    if busiest is None or busiest < BUSY_PCT:
        if m.duration_us < LAUNCH_MAX_US:
            return "launch", "short_kernel" if m.kernel_count <= 1 else "many_short_kernels"
        if m.waves_per_sm is not None and m.waves_per_sm < LAUNCH_MAX_WAVES:
            return ("launch" if m.duration_us < 4 * LAUNCH_MAX_US else "latency"), "small_grid"
    if busiest is not None and busiest >= BUSY_PCT:
        both = sm is not None and mem is not None
        balanced = both and abs((sm or 0.0) - (mem or 0.0)) < DOMINANT_MARGIN_PCT
        dram = m.dram_throughput_pct
        if balanced and dram is not None and dram < BUSY_PCT:
            # the busy memory unit is on chip (shared memory, L1) feeding busy SMs: a GEMM's
            # tiles (measured: an fp16 matmul on the H200 at SM 93 %, memory 95 %, DRAM 20 %)
            return "compute", "balanced"
        if mem is not None and (sm is None or mem >= sm):
            limiter = "balanced" if balanced else _memory_limiter(m)
            return "memory", limiter
        return "compute", "balanced" if balanced else "sm_throughput"
    return "latency", _latency_limiter(m)


def _memory_limiter(m: ClassInput) -> str:
    # a high L2 hit rate means the traffic the SOL counts stays on chip
    if m.l2_hit_pct is not None and m.l2_hit_pct >= 80.0:
        return "l2_bandwidth"
    return "dram_bandwidth"


def _latency_limiter(m: ClassInput) -> str:
    achieved = m.achieved_occupancy_pct
    if achieved is not None and achieved < LOW_OCCUPANCY_PCT:
        cap = m.occupancy_limiter
        return f"occupancy:{cap}" if cap else "occupancy"
    if m.waves_per_sm is not None and m.waves_per_sm < 1.0:
        return "partial_wave"
    return "stalls"
