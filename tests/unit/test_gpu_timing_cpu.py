"""The arithmetic of the GPU timer that needs no GPU: attributing CUPTI activity to a timed
call, the no-CUPTI sync floor, and what the host keeps of the worker's account."""

from __future__ import annotations

import pytest

from sandboxharness.stages.execute import _clock_info
from sandboxharness.worker.gpu import sync_excess
from sandboxharness.worker.gputrace import window_span

US = 1_000  # ns


def test_span_covers_every_stream_and_skips_the_flush() -> None:
    spans = [(100 * US, 160 * US),   # the timer's L2 flush, enqueued first
             (165 * US, 170 * US),   # the candidate's kernel on the timed stream
             (166 * US, 400 * US)]   # its hidden work on a private stream
    assert window_span(spans, 90 * US, 500 * US, skip=1) == pytest.approx(235e-6)


def test_span_ignores_activity_outside_the_window() -> None:
    spans = [(10 * US, 20 * US), (100 * US, 160 * US), (170 * US, 180 * US),
             (600 * US, 900 * US)]  # before the call, and the next call's
    assert window_span(spans, 90 * US, 500 * US, skip=1) == pytest.approx(10e-6)


def test_span_is_zero_when_only_the_flush_ran() -> None:
    assert window_span([(100 * US, 160 * US)], 90 * US, 500 * US, skip=1) == 0.0


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
