"""Every piece of GPU work of the worker process, on every stream, with device timestamps.

The CUPTI activity API (through ``cupti-python``, when it imports and libcupti loads) records
each kernel, copy and memset with its start and end on the GPU's clock, whatever stream it
ran on. The timer uses it to see work a candidate hides on a private stream; it is only ever
used to make a timing *longer* than the timed stream's own events (see ``gputimer.GpuTimer``).
"""

from __future__ import annotations

import threading
from typing import Any

KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET")
"""CONCURRENT_KERNEL, not KERNEL: the latter serialises kernels and would change the timing."""
BUFFER_BYTES = 4 << 20


class ActivityTrace:
    """Collects (start ns, end ns, stream id) of GPU activity while enabled; ``now()`` is a
    host timestamp on the same clock, so a host-side window [before, after] selects what ran
    inside it.
    One per process (CUPTI takes one set of buffer callbacks): use :func:`shared`."""

    def __init__(self) -> None:
        from cupti import cupti  # type: ignore[import-not-found,unused-ignore]

        self._cupti: Any = cupti
        self._lock = threading.Lock()
        self._spans: list[tuple[int, int, int]] = []
        self._names: list[tuple[int, str]] = []
        self.kernel_names: list[tuple[int, str]] = []
        """(start ns, name) of the kernels handed over by the last drain."""
        self._on = False
        self.now = cupti.get_timestamp
        self.version = _version()
        self.now()  # loads libcupti now: a missing library fails here, not mid-benchmark
        cupti.activity_register_callbacks(self._requested, self._completed)
        self._kinds = [getattr(cupti.ActivityKind, k) for k in KINDS]

    @staticmethod
    def _requested() -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def _completed(self, activities: list[Any]) -> None:
        got = [(int(a.start), int(a.end), int(getattr(a, "stream_id", 0)))
               for a in activities if getattr(a, "start", 0) and getattr(a, "end", 0)]
        names = [(int(a.start), str(a.name)[:200]) for a in activities
                 if getattr(a, "start", 0) and isinstance(getattr(a, "name", None), str)]
        with self._lock:
            self._spans.extend(got)
            self._names.extend(names)

    def enable(self) -> None:
        if not self._on:
            for kind in self._kinds:
                self._cupti.activity_enable(kind)
            self._on = True

    def disable(self) -> None:
        if self._on:
            self.drain()
            for kind in self._kinds:
                self._cupti.activity_disable(kind)
            self._on = False

    def drain(self) -> list[tuple[int, int, int]]:
        """Everything recorded since the last drain (forces CUPTI to hand over its buffers)."""
        self._cupti.activity_flush_all(1)
        with self._lock:
            out, self._spans = self._spans, []
            self.kernel_names, self._names = self._names, []
        return out


_SHARED: list[ActivityTrace] = []


def shared() -> ActivityTrace:
    """The process's trace (made on first use; raises when cupti-python or libcupti is
    missing)."""
    if not _SHARED:
        _SHARED.append(ActivityTrace())
    return _SHARED[0]


def _version() -> str:
    try:
        from importlib.metadata import version

        return f"cupti-python {version('cupti-python')}"
    except Exception:  # noqa: BLE001  (metadata is informational only)
        return "cupti-python"


def window_span(records: list[tuple[int, int, int]], before: int, after: int,
                prelude: int, timed_stream: int) -> tuple[float, bool] | None:
    """The call's activity: what began inside [before, after], less the timer's own flush and
    pad (the first ``prelude`` records on ``timed_stream``: a side stream's kernel may well
    start before the pad does). Returns (seconds from its first start to its last end, whether
    any of it ran off the timed stream). When the prelude is not where it should be (the
    current stream was switched) the whole window counts as off-stream work: never less; when
    nothing at all was recorded (CUPTI switched off or its buffers taken) None: not vouched for.
    """
    inside = sorted(r for r in records if before <= r[0] <= after)
    if not inside:
        return None
    own = [r for r in inside if r[2] == timed_stream][:prelude]
    if len(own) < prelude:
        rest, off = inside, True
    else:
        rest = [r for r in inside if r not in own]
        off = any(r[2] != timed_stream for r in rest)
    if not rest:
        return 0.0, False
    return max(0, max(r[1] for r in rest) - rest[0][0]) / 1e9, off


def names_in(names: list[tuple[int, str]], before: int, after: int, cap: int = 16) -> list[str]:
    """Distinct names of the kernels that began inside [before, after] (at most ``cap``)."""
    out: list[str] = []
    for start, name in sorted(names):
        if before <= start <= after and name not in out:
            out.append(name)
            if len(out) >= cap:
                break
    return out
