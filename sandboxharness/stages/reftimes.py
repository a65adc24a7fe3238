"""The reference's timed calls, once per run for every candidate of a definition.

A run's candidates of one definition share its seed (``dataset.engine``): the same cases,
the same timed seeds, the same reference code. FlashInfer-Bench times its reference once per
workload and reuses the latency for every solution; a run does the same, per GPU lane. The
first candidate to get there times the reference; the others wait for it rather than time it
again. A timing that failed is not kept (the next candidate tries again)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from .execute import BenchResult


@dataclass(frozen=True)
class Timed:
    benches: list[BenchResult]
    by: str
    """The candidate whose evaluation timed the reference."""


class ReferenceTimings:
    """Run-scoped and thread-safe; the ``BenchResult``s handed out are shared, never changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._per_key: dict[Hashable, threading.Lock] = {}
        self._done: dict[Hashable, Timed] = {}

    def get(self, key: Hashable, time_it: Callable[[], list[BenchResult] | None],
            by: str) -> Timed | None:
        """The reference's benches for ``key``: kept from an earlier candidate, or timed now
        by ``time_it`` (None: it failed, nothing kept)."""
        with self._lock:
            lock = self._per_key.setdefault(key, threading.Lock())
        with lock:
            if key in self._done:
                return self._done[key]
            benches = time_it()
            if benches is None:
                return None
            self._done[key] = Timed(benches, by)
            return self._done[key]
