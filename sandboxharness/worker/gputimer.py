"""The benchmark stage's GPU timer (runs inside the sandbox, in the worker): do_bench-style
CUDA events on the timed stream, raised to whatever ran on other streams (CUPTI through
``gputrace``, or a device-sync floor without it), plus fresh input addresses per call.

Its figures are raw facts: the host cross-checks them against its own clock.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import Any

from .gputrace import names_in, window_span
from .protocol import NO_CUPTI_ENV  # 1: time without CUPTI (the fallback the tests compare)

FLUSH_FACTOR = 2
FLUSH_MIN_BYTES = 256 * 10**6
"""The L2 flush writes this many times the L2 size, and at least do_bench's 256 MB."""
PAD_S = 100e-6
"""Device-side spin after the flush: covers the host's launch latency (Triton's included)."""
FLOOR_CALLS = 21
CALIBRATION_CALLS = 15
FLOOR_JITTER_FACTOR = 3.0
MIN_JITTER_S = 1e-6


# -- timing ----------------------------------------------------------------------------------
def sync_excess(stream: list[float], total: list[float], floor: float,
                jitter: float) -> list[float]:
    """Without CUPTI: per call, the time the device stayed busy after the timed stream's end
    event, as ``total - floor`` (start event to an event recorded once a device-wide sync
    returned, less that round trip), where it exceeds the stream time by more than the floor's
    jitter; else 0.0 (nothing ran elsewhere that we can tell)."""
    return [t - floor if t - floor > s + jitter else 0.0
            for s, t in zip(stream, total, strict=True)]


class GpuTimer:
    """Times calls the way ``triton.testing.do_bench`` does, and never misses another stream.

    The *stream time* of a call: L2 flush (a write of ``max(FLUSH_FACTOR x L2,
    FLUSH_MIN_BYTES)``) -> start event -> the call -> end event, all on the current stream,
    the figure do_bench reports. After it a device-wide synchronise, so work on any stream is
    done before the next call. The *reported* time is never below what ran elsewhere:
      - with CUPTI (``gputrace``): a spin of ``PAD_S`` follows the flush, so the host's launch
        latency stays out of the window as in do_bench's deep queue. When any of the call's
        kernels/copies/memsets ran off the timed stream, the time is raised to their span
        (first start to last end, on every stream) plus the fixed cost the events add to a
        kernel on the timed stream (calibrated here), so moving work elsewhere gains nothing;
      - without: no pad (it would be a window in which a side stream could work unseen) and a
        synchronise before the start event; an ``after`` event recorded once the final
        synchronise returned, less the round trip an empty call measures (the floor), raises
        the time when it exceeds the stream time by more than the floor's jitter.
    The functions are bound when the timer is made, before any candidate code exists; the
    integrity snapshot covers the originals as well.
    """

    def __init__(self) -> None:
        import torch

        self._sync = torch.cuda.synchronize
        self._event = torch.cuda.Event
        self._spin: Callable[[int], None] = torch.cuda._sleep
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
        self.flush_bytes = max(FLUSH_FACTOR * self.l2_bytes, FLUSH_MIN_BYTES)
        self._flush = torch.empty(self.flush_bytes // 4, dtype=torch.int32, device="cuda")
        self.seen_ptrs: set[int] = set()
        self._pad_cycles = 0
        self._trace: Any = None
        self._prelude: tuple[int, int] = (0, 0)  # (records a flush + pad leaves, their stream)
        self._event_cost = 0.0
        self._floor: tuple[float, float] | None = None  # (floor, jitter) seconds, no CUPTI
        self.method = ""
        self.cupti = False
        """True once CUPTI is in use (after the first timed batch)."""
        self.trace_error: str | None = None
        self.kernel_names: list[list[str]] = []
        """Per call of the last batch (CUPTI only): names of the kernels it launched."""

    def flush(self) -> None:
        """Evict the L2 (and, with CUPTI, keep the device busy for ``PAD_S`` beyond that)."""
        self._flush.zero_()
        if self._pad_cycles:
            self._spin(self._pad_cycles)
        else:
            self._sync()

    def _calibrate_pad(self) -> int:
        start = self._event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = self._event(enable_timing=True)  # type: ignore[no-untyped-call]
        cycles = 1_000_000
        self._spin(cycles)  # warm
        start.record()
        self._spin(cycles)
        end.record()
        end.synchronize()
        per_s = cycles / max(start.elapsed_time(end) / 1e3, 1e-9)
        return max(int(per_s * PAD_S), 1)

    def _start_trace(self) -> None:
        """CUPTI if it loads (first timed batch only: never under compute-sanitizer, which
        runs no timed batch), else calibrate the sync floor."""
        if self.method:
            return
        if os.environ.get(NO_CUPTI_ENV) != "1":
            try:
                self._start_cupti()
                return
            except Exception as exc:  # noqa: BLE001  (optional: fall back, and say why)
                self.trace_error = f"{type(exc).__name__}: {exc}"[:300]
                self._trace, self._pad_cycles = None, 0
        diffs = []
        for _ in range(FLOOR_CALLS):
            stream, total = self._one(lambda: None)[1:]
            diffs.append(total - stream)
        floor = statistics.median(diffs)
        jitter = statistics.median(abs(d - floor) for d in diffs)
        self._floor = (floor, max(FLOOR_JITTER_FACTOR * jitter, MIN_JITTER_S))
        self.method = "cuda-events + device-sync floor (CUPTI unavailable)"

    def _start_cupti(self) -> None:
        from .gputrace import shared

        trace = shared()
        self._pad_cycles = self._calibrate_pad()
        trace.enable()
        try:
            self._sync()
            trace.drain()
            self.flush()
            self._sync()
            lone = trace.drain()  # what one flush + pad leaves (usually 2 records)
            if not lone or len({r[2] for r in lone}) != 1:
                raise RuntimeError(f"CUPTI recorded {len(lone)} records for the flush")
            self._prelude = (len(lone), lone[0][2])
            self._trace = trace
            # what events add to a kernel on the timed stream (start-to-kernel, kernel-to-end)
            _, stream, _, spans = self._measure(CALIBRATION_CALLS, lambda _i: lambda: self._spin(1))
            if any(sp is None for sp in spans):
                raise RuntimeError("CUPTI missed a calibration kernel")
            self._event_cost = max(statistics.median(
                s - sp[0] for s, sp in zip(stream, spans, strict=True) if sp is not None), 0.0)
        finally:
            trace.disable()
        self.cupti = True
        self.method = f"cuda-events + CUPTI all-stream span ({trace.version})"

    def _one(self, call: Callable[[], Any]) -> tuple[Any, float, float]:
        start = self._event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = self._event(enable_timing=True)  # type: ignore[no-untyped-call]
        after = self._event(enable_timing=True)  # type: ignore[no-untyped-call]
        self.flush()
        start.record()
        ret = call()
        end.record()
        self._sync()
        after.record()
        after.synchronize()
        return ret, start.elapsed_time(end) / 1e3, start.elapsed_time(after) / 1e3

    def _measure(self, n: int, make: Callable[[int], Callable[[], Any]],
                 after: Callable[[int, Any], None] | None = None,
                 ) -> tuple[list[Any], list[float], list[float], list[tuple[float, bool] | None]]:
        """(results, stream times, start-to-after times, per call (span, off the stream) or
        None when CUPTI recorded nothing in its window). ``make(i)`` gives call ``i`` (its
        inputs made just then, outside the window); ``after(i, result)`` runs once it is done,
        outside the window too (the worker binds the call's results there)."""
        trace = self._trace
        self._sync()
        if trace is not None:
            trace.drain()
        rets, stream, total, windows = [], [], [], []
        for i in range(n):
            call = make(i)
            self._sync()  # the inputs' copies are done before the window opens
            before = trace.now() if trace is not None else 0
            ret, t_stream, t_total = self._one(call)
            windows.append((before, trace.now() if trace is not None else 0))
            if after is not None:
                after(i, ret)
            rets.append(ret)
            stream.append(t_stream)
            total.append(t_total)
        if trace is None:
            return rets, stream, total, [(0.0, False)] * n
        records = trace.drain()
        self.kernel_names = [names_in(trace.kernel_names, a, b) for a, b in windows]
        return rets, stream, total, [window_span(records, a, b, *self._prelude)
                                     for a, b in windows]

    def time_calls(self, calls: list[Callable[[], Any]]
                   ) -> tuple[list[Any], list[float], dict[str, Any]]:
        """Run and time each call; returns (results, reported seconds, how it was measured)."""
        return self.time_made(len(calls), lambda i: calls[i])

    def time_made(self, n: int, make: Callable[[int], Callable[[], Any]],
                  after: Callable[[int, Any], None] | None = None,
                  ) -> tuple[list[Any], list[float], dict[str, Any]]:
        """Run and time ``n`` calls made one at a time (see ``_measure``)."""
        self._start_trace()
        if self._trace is not None:
            self._trace.enable()
        try:
            rets, stream, total, spans = self._measure(n, make, after)
        finally:
            if self._trace is not None:
                self._trace.disable()
        lost = sum(sp is None for sp in spans) if self._trace is not None else 0
        if self._trace is not None:
            other = [sp[0] + self._event_cost if sp is not None and sp[1] else 0.0
                     for sp in spans]
        else:
            other = sync_excess(stream, total, *(self._floor or (0.0, 0.0)))
        reported = [max(s, o) for s, o in zip(stream, other, strict=True)]
        info: dict[str, Any] = {
            "method": self.method, "stream_s": stream, "flush_bytes": self.flush_bytes,
            "other_streams_longer": sum(o > s for s, o in zip(stream, other, strict=True))}
        if self._trace is not None:
            info["kernel_names"] = self.kernel_names
            info["event_cost_s"] = self._event_cost
            info["off_stream_calls"] = sum(sp is not None and sp[1] for sp in spans)
            info["trace_lost"] = lost  # the worker reports these as an integrity violation
        if self._floor is not None:
            info["sync_floor_s"], info["floor_jitter_s"] = self._floor
        if self.trace_error:
            info["cupti_error"] = self.trace_error
        return rets, reported, info

    # -- fresh addresses -----------------------------------------------------------------
    @staticmethod
    def _ptrs(values: list[Any]) -> list[int]:
        import torch

        return [v.data_ptr() for v in values if type(v) is torch.Tensor and v.numel() > 0]

    def remember(self, values: list[Any]) -> None:
        """Addresses the candidate has been given; timed inputs will never reuse one."""
        self.seen_ptrs.update(self._ptrs(values))

    def fresh(self, prepared: list[list[Any]]) -> int:
        """Move any prepared input that sits at an address the candidate already saw.

        The colliding tensors stay alive until every set is placed, so the allocator cannot
        hand the same block back. Returns how many tensors had to move.
        """
        import torch

        hold: list[Any] = []
        moved = 0
        for inputs in prepared:
            for i, v in enumerate(inputs):
                if type(v) is not torch.Tensor or v.numel() == 0:
                    continue
                tries = 0
                while v.data_ptr() in self.seen_ptrs and tries < 64:
                    hold.append(v)
                    v = v.clone()
                    tries += 1
                    moved += 1
                inputs[i] = v
            self.remember(inputs)
        del hold
        return moved
