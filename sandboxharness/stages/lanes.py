"""GPU lanes: which GPU a candidate's jobs use, and who may use it while a timing window is open.

Each GPU is one lane. Any GPU request of any candidate on it (a build, a correctness call, a
sanitizer run, a warm-up) holds the lane *shared*; a timed batch holds it *exclusive*: it
waits until every shared holder's request has returned and keeps new ones out until the
batch is done, so nothing else of the harness runs on that GPU inside a timing window. Writers
are preferred: a waiting timed batch is not starved by a stream of correctness calls.

A request is the unit because a worker cannot be paused mid-call: the lane is taken per
request, never across a whole job, so a long correctness phase still lets timing in between
its calls.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field


class _SharedExclusive:
    """A writer-preferring shared/exclusive lock."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            while self._exclusive or self._shared:
                self._cond.wait()
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()

    def state(self) -> tuple[int, bool, int]:
        """(shared holders, exclusive held, exclusive waiters): for tests and displays."""
        with self._cond:
            return self._shared, self._exclusive, self._waiting


@dataclass(eq=False)  # a lane is itself, not its fields (and so may be a frozen default)
class GpuLane:
    """One GPU. ``index`` None: no GPU to share (CPU runs, a single evaluation)."""

    index: int | None = None
    _lock: _SharedExclusive = field(default_factory=_SharedExclusive, repr=False)
    candidates: int = 0
    """Candidates currently placed on this lane."""

    def shared(self) -> contextlib.AbstractContextManager[None]:
        return self._lock.shared() if self.index is not None else contextlib.nullcontext()

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        return self._lock.exclusive() if self.index is not None else contextlib.nullcontext()

    def env(self) -> dict[str, str]:
        """What a job on this lane is given: only its GPU is visible (as ``cuda:0``)."""
        return {} if self.index is None else {"CUDA_VISIBLE_DEVICES": str(self.index)}

    def state(self) -> tuple[int, bool, int]:
        return self._lock.state()


NO_LANE = GpuLane()
"""The lane of a lone evaluation: locks that never wait, no device selection."""


class Lanes:
    """The GPUs of one run; a candidate is placed on the lane with the fewest candidates."""

    def __init__(self, indices: Sequence[int]) -> None:
        self.lanes = [GpuLane(i) for i in indices]
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def place(self) -> Iterator[GpuLane]:
        if not self.lanes:
            yield NO_LANE
            return
        with self._lock:
            lane = min(self.lanes, key=lambda g: g.candidates)
            lane.candidates += 1
        try:
            yield lane
        finally:
            with self._lock:
                lane.candidates -= 1
