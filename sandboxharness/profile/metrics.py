"""What Nsight Compute is asked for, and the one command line the parser expects.

Every metric is one that ncu's own sections (SpeedOfLight, Occupancy, LaunchStats,
MemoryWorkloadAnalysis) read on sm_70 and later, so one list serves every GPU we run on. A
metric ncu does not know makes it profile nothing at all, so the list is short and fixed;
a new one is added here and checked on the device (``benchmarks/ncu_capture.sh``).
"""

from __future__ import annotations

DURATION = "gpu__time_duration.sum"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
REGISTERS = "launch__registers_per_thread"
DYN_SMEM = "launch__shared_mem_per_block_dynamic"
THEORETICAL_OCC = "sm__maximum_warps_per_active_cycle_pct"
ACHIEVED_OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
WAVES = "launch__waves_per_multiprocessor"
L2_HIT = "lts__t_sector_hit_rate.pct"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
GRID = "launch__grid_size"
BLOCK = "launch__block_size"
SM_COUNT = "device__attribute_multiprocessor_count"
OCC_LIMITS = {
    "registers": "launch__occupancy_limit_registers",
    "shared_mem": "launch__occupancy_limit_shared_mem",
    "warps": "launch__occupancy_limit_warps",
    "blocks": "launch__occupancy_limit_blocks",
}
"""Blocks per SM each resource allows; the smallest names what caps occupancy."""

METRICS: tuple[str, ...] = (
    DURATION, SM_PCT, MEM_PCT, DRAM_PCT, REGISTERS, DYN_SMEM, THEORETICAL_OCC, ACHIEVED_OCC,
    WAVES, L2_HIT, DRAM_READ, DRAM_WRITE, GRID, BLOCK, SM_COUNT, *OCC_LIMITS.values(),
)

MARKER_KERNEL = "spin_kernel"
"""The worker opens each profiled call with ``torch.cuda._sleep`` (ATen's ``spin_kernel``):
rows between two markers belong to one call, so one profiler process serves every regime."""


def ncu_options(*, launch_count: int, log_file: str) -> list[str]:
    """The ncu options (executable and target excluded) whose output :mod:`.ncu_parse` reads.

    ``--profile-from-start off``: only kernels between the worker's cudaProfilerStart/Stop
    (the candidate's profiled calls) are measured, never input generation or warm-ups.
    ``--clock-control none``: ncu would otherwise lock the GPU's clocks for every process on
    it. ``--print-units base``: ns and bytes, whatever the magnitude.
    """
    return ["--csv", "--page", "raw", "--print-units", "base",
            "--metrics", ",".join(METRICS), "--profile-from-start", "off",
            "--target-processes", "all", "--clock-control", "none",
            "--launch-count", str(launch_count), "--log-file", log_file]
