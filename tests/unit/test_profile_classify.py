"""The bottleneck class and limiter on synthetic metric sets, one per rule of
``profile.classify`` (each set sits on the side of a threshold its rule is about)."""

from __future__ import annotations

import pytest

from sandboxharness.profile import classify as c
from sandboxharness.profile.signature import KernelMetrics, Signature, classify


def sig(**kw: object) -> Signature:
    base: dict[str, object] = {"kernel": "k", "duration_us": 200.0}
    return classify(KernelMetrics.model_validate({**base, **kw}))


@pytest.mark.parametrize(("metrics", "bottleneck", "limiter"), [
    # memory: DRAM well used, SM idle, traffic misses L2
    ({"sm_throughput_pct": 20.0, "mem_throughput_pct": 88.0, "l2_hit_pct": 12.0},
     "memory", "dram_bandwidth"),
    # memory, but served from L2
    ({"sm_throughput_pct": 20.0, "mem_throughput_pct": 75.0, "l2_hit_pct": 93.0},
     "memory", "l2_bandwidth"),
    # compute: a large GEMM
    ({"sm_throughput_pct": 91.0, "mem_throughput_pct": 45.0}, "compute", "sm_throughput"),
    # both busy within the margin: the higher names the class, the limiter says balanced
    ({"sm_throughput_pct": 78.0, "mem_throughput_pct": 82.0}, "memory", "balanced"),
    ({"sm_throughput_pct": 82.0, "mem_throughput_pct": 78.0}, "compute", "balanced"),
    # a tiny kernel: launch
    ({"duration_us": 2.5, "sm_throughput_pct": 1.0, "mem_throughput_pct": 1.0},
     "launch", "short_kernel"),
    ({"duration_us": 2.5, "kernel_count": 40}, "launch", "many_short_kernels"),
    # a grid filling a sliver of one wave, short: launch; long: latency
    ({"duration_us": 12.0, "waves_per_sm": 0.05, "sm_throughput_pct": 3.0},
     "launch", "small_grid"),
    ({"duration_us": 900.0, "waves_per_sm": 0.05, "sm_throughput_pct": 3.0},
     "latency", "small_grid"),
    # nothing busy, few warps resident: occupancy, and what caps it
    ({"sm_throughput_pct": 30.0, "mem_throughput_pct": 35.0, "achieved_occupancy_pct": 12.0,
      "occupancy_limiter": "registers", "waves_per_sm": 4.0}, "latency", "occupancy:registers"),
    ({"sm_throughput_pct": 30.0, "mem_throughput_pct": 35.0, "achieved_occupancy_pct": 70.0,
      "waves_per_sm": 0.6}, "latency", "partial_wave"),
    ({"sm_throughput_pct": 30.0, "mem_throughput_pct": 35.0, "achieved_occupancy_pct": 70.0,
      "waves_per_sm": 8.0}, "latency", "stalls"),
])
def test_rules(metrics: dict[str, object], bottleneck: str, limiter: str) -> None:
    got = sig(**metrics)
    assert (got.bottleneck, got.limiter) == (bottleneck, limiter)


def test_thresholds_are_the_edges_of_their_rules() -> None:
    busy = c.BUSY_PCT
    assert sig(sm_throughput_pct=busy, mem_throughput_pct=1.0).bottleneck == "compute"
    assert sig(sm_throughput_pct=busy - 0.1, mem_throughput_pct=1.0).bottleneck == "latency"
    assert sig(duration_us=c.LAUNCH_MAX_US - 0.01).bottleneck == "launch"
    assert sig(duration_us=c.LAUNCH_MAX_US).bottleneck == "latency"


def test_a_busy_unit_outranks_a_short_duration() -> None:
    """A 4 us kernel at 90 % of DRAM bandwidth is memory-bound, not launch-bound."""
    assert sig(duration_us=4.0, mem_throughput_pct=90.0).bottleneck == "memory"


def test_unknown_metrics_still_classify() -> None:
    got = sig()
    assert got.bottleneck == "latency" and got.limiter == "stalls"
    assert got.bottleneck in c.BOTTLENECKS


def test_signature_keeps_every_metric_and_is_frozen() -> None:
    got = sig(registers_per_thread=40, dram_bytes=2**33, grid_size=4096, block_size=256)
    assert got.registers_per_thread == 40 and got.dram_bytes == 2**33
    with pytest.raises(Exception, match="frozen"):
        got.limiter = "x"  # type: ignore[misc]


@pytest.mark.parametrize("bad", [
    {"duration_us": float("nan")}, {"duration_us": -1.0}, {"sm_throughput_pct": 5000.0},
    {"kernel": "a\x1b[2Jb"}, {"kernel": ""}, {"kernel": "k" * 600}, {"extra": 1},
])
def test_metrics_refuse_impossible_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        KernelMetrics.model_validate({"kernel": "k", "duration_us": 1.0, **bad})


def test_busy_on_chip_memory_beside_busy_sms_is_compute_not_dram() -> None:
    """A tensor-core GEMM keeps shared memory as busy as its SMs while DRAM idles (the H200
    capture: SM 93 %, memory 95 %, DRAM 20 %): compute-bound, not memory-bound."""
    gemm = c.ClassInput(duration_us=1400.0, sm_throughput_pct=93.0, mem_throughput_pct=95.0,
                      dram_throughput_pct=20.0)
    assert c.classify_metrics(gemm) == ("compute", "balanced")
    streaming = c.ClassInput(duration_us=60.0, sm_throughput_pct=34.0, mem_throughput_pct=81.0,
                           dram_throughput_pct=81.0)
    assert c.classify_metrics(streaming)[0] == "memory"
    both_busy = c.ClassInput(duration_us=500.0, sm_throughput_pct=90.0, mem_throughput_pct=92.0,
                           dram_throughput_pct=91.0)
    assert c.classify_metrics(both_busy) == ("memory", "balanced")
