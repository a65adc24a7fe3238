"""The parser and classifier on real Nsight Compute output, captured on the H200 by
``benchmarks/ncu_capture.sh`` (its command lines and provenance beside the files, in
tests/data/ncu/). Each capture is a kernel whose bottleneck is not in doubt."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.profile.evidence import signatures
from sandboxharness.profile.ncu_parse import parse

NCU = Path(__file__).resolve().parents[1] / "data" / "ncu"
pytestmark = pytest.mark.skipif(not (NCU / "ORIGIN.txt").is_file(),
                                reason="tests/data/ncu: the H200 captures are not vendored yet")


def _sigs(name: str, calls: int = 1) -> list:
    rep = parse((NCU / f"{name}.csv").read_text())
    assert not rep.errors, rep.errors
    return signatures(rep.rows, calls)


def test_capture_command_lines_are_the_stage_s() -> None:
    for cmd in NCU.glob("*.cmd"):
        text = cmd.read_text()
        assert "--profile-from-start off" in text and "--print-units base" in text, cmd.name
        if "details" not in cmd.name:
            assert "--csv --page raw" in text, cmd.name


def test_rmsnorm_triton_is_memory_bound() -> None:
    (sig,) = _sigs("rmsnorm_memory")
    assert sig is not None and sig.kernel.startswith("rmsnorm_kernel")
    assert sig.bottleneck == "memory" and sig.kernel_count == 1, sig
    assert sig.dram_bytes is not None and sig.dram_bytes > 200e6  # 16384 x 4096 fp16, in and out


def test_large_fp16_matmul_is_compute_bound() -> None:
    (sig,) = _sigs("matmul_compute")
    assert sig is not None and sig.bottleneck == "compute", sig
    assert sig.duration_us > 100


def test_tiny_add_is_launch_bound() -> None:
    (sig,) = _sigs("tiny_launch")
    assert sig is not None and sig.bottleneck == "launch", sig
    assert sig.duration_us < 10 and sig.grid_size == 1


def test_three_calls_in_one_process_split_at_the_markers() -> None:
    small, mid, large = _sigs("rmsnorm_three_calls", 3)
    for s in (small, mid, large):
        assert s is not None and s.kernel.startswith("rmsnorm_kernel") and s.kernel_count == 1
    assert small is not None and large is not None
    assert small.grid_size == 64 and large.grid_size == 16384
    assert small.duration_us < large.duration_us and large.bottleneck == "memory"


def test_details_page_reads_like_the_raw_page() -> None:
    rep = parse((NCU / "rmsnorm_details.csv").read_text())
    assert rep.layout == "details"
    (sig,) = signatures(rep.rows, 1)
    assert sig is not None and sig.kernel.startswith("rmsnorm_kernel") and sig.grid_size == 4096
