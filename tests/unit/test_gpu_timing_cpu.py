"""The arithmetic of the GPU timer that needs no GPU: attributing CUPTI activity to a timed
call, the no-CUPTI sync floor, and what the host keeps of the worker's account."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxharness.stages.execute import _clock_info
from sandboxharness.worker.gputimer import sync_excess
from sandboxharness.worker.gputrace import window_span

US = 1_000  # ns
TIMED, SIDE = 7, 13  # stream ids
FLUSH = (100 * US, 160 * US, TIMED)
PAD = (160 * US, 260 * US, TIMED)


def test_work_on_the_timed_stream_only_is_not_off_stream() -> None:
    span, off = window_span([FLUSH, PAD, (262 * US, 270 * US, TIMED)], 90 * US, 500 * US,
                            prelude=2, timed_stream=TIMED)
    assert span == pytest.approx(8e-6) and not off


def test_side_stream_work_that_starts_during_the_flush_is_counted() -> None:
    hidden = (120 * US, 150 * US, SIDE)  # sorts before the pad: must not be taken for it
    span, off = window_span([FLUSH, hidden, PAD, (262 * US, 263 * US, TIMED)], 90 * US,
                            500 * US, prelude=2, timed_stream=TIMED)
    assert off and span == pytest.approx(143e-6)


def test_activity_outside_the_window_is_ignored() -> None:
    records = [(10 * US, 20 * US, SIDE), FLUSH, PAD, (262 * US, 270 * US, TIMED),
               (600 * US, 900 * US, SIDE)]  # before the call, and the next call's
    assert window_span(records, 90 * US, 500 * US, 2, TIMED) == (pytest.approx(8e-6), False)


def test_nothing_but_the_prelude_is_zero() -> None:
    assert window_span([FLUSH, PAD], 90 * US, 500 * US, 2, TIMED) == (0.0, False)


def test_a_window_with_no_activity_at_all_is_not_vouched_for() -> None:
    """Not even the timer's own flush: CUPTI was switched off or its buffers taken."""
    assert window_span([(600 * US, 900 * US, TIMED)], 90 * US, 500 * US, 2, TIMED) is None


def test_a_switched_current_stream_counts_the_whole_window() -> None:
    moved = [(r[0], r[1], SIDE) for r in (FLUSH, PAD)] + [(262 * US, 270 * US, SIDE)]
    span, off = window_span(moved, 90 * US, 500 * US, 2, TIMED)
    assert off and span == pytest.approx(170e-6)


def test_sync_excess_counts_only_what_exceeds_the_jitter() -> None:
    stream = [10e-6, 10e-6, 10e-6]
    total = [25e-6, 26e-6, 300e-6]  # floor 15 us: the first two are honest, the third is not
    assert sync_excess(stream, total, floor=15e-6, jitter=2e-6) == [0.0, 0.0,
                                                                    pytest.approx(285e-6)]


def test_clock_account_keeps_known_plain_fields_only() -> None:
    raw = {"method": "cuda-events + CUPTI all-stream span", "stream_s": [1e-5, 2e-5, 3e-5],
           "other_streams_longer": 2, "flush_bytes": 256 * 10**6, "evil": {"x": 1},
           "cupti_error": "x" * 1000, "sync_floor_s": True}
    info = _clock_info(raw)
    assert info["method"].startswith("cuda-events") and len(info["cupti_error"]) == 300
    assert info["stream_median_ms"] == pytest.approx(0.02)
    assert "evil" not in info and "sync_floor_s" not in info
    assert _clock_info("not a dict") == {} and _clock_info({"stream_s": [-1.0]}) == {}


def test_a_flag_raised_by_the_worker_is_a_violation() -> None:
    from sandboxharness.worker.integrity import Snapshot

    snap = Snapshot({})
    assert snap.violations() == []
    snap.flag("CUPTI recorded nothing in 3 timed calls")
    assert snap.violations() == ["CUPTI recorded nothing in 3 timed calls"]


def test_gpu_jobs_get_the_cupti_library_dir_only_when_it_holds_libcupti(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sandboxharness.stages import compile_cuda

    monkeypatch.setenv("SHX_CUPTI_LIB_DIR", str(tmp_path))
    compile_cuda.cupti_lib_dir.cache_clear()
    try:
        assert compile_cuda.gpu_env().get("LD_LIBRARY_PATH") != str(tmp_path.resolve())
        (tmp_path / "libcupti.so").write_bytes(b"")
        compile_cuda.cupti_lib_dir.cache_clear()
        assert compile_cuda.gpu_env()["LD_LIBRARY_PATH"] == str(tmp_path.resolve())
    finally:
        compile_cuda.cupti_lib_dir.cache_clear()
