"""SIGINT, SIGTERM and SIGHUP in the CLI: every exit path cleans up.

Python's default for SIGTERM ends the process at once: no ``finally`` runs, so the job
directory and the job's cgroups would stay behind (the sandboxed tree itself dies with the
launcher's host-death watch). Here the first signal SIGKILLs every live sandboxed process
tree at once (no waiting, no locks) and raises :class:`~sandboxharness.errors.Interrupted`
in the main thread, which unwinds through the pipeline's ``finally`` blocks: each sandboxed
process reaped and its cgroups removed, the job directory removed. Later signals are ignored
while that bounded cleanup runs. Inside :func:`deferred` (an audit append) the exception
waits for the section's end, so nothing is left half-written.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from ..errors import Interrupted

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_state = {"fired": 0, "deferred": 0}


# where the process backend registers its live children (the doctor's probes start some too)
_CHILDREN = "sandboxharness.sandbox._child"


def _stop_sandboxes() -> None:
    children = sys.modules.get(_CHILDREN)
    if children is not None:  # never imported: nothing was started
        children.kill_running()


def _handler(signum: int, _frame: FrameType | None) -> None:
    if _state["fired"]:
        return  # cleanup is under way and bounded: let it finish
    _state["fired"] = signum
    _stop_sandboxes()
    if not _state["deferred"]:
        raise Interrupted(signum)


def reap() -> None:
    """After an interrupt: reap any sandboxed process whose owner was unwound past."""
    children = sys.modules.get(_CHILDREN)
    if children is not None:
        children.reap_all()


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """Handle the signals for the duration (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state["fired"] = 0
    old = {s: signal.signal(s, _handler) for s in HANDLED}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A section a signal must not cut: it takes effect when the section ends."""
    before = _state["fired"]
    _state["deferred"] += 1
    try:
        yield
    finally:
        _state["deferred"] -= 1
    if _state["fired"] and not before and not _state["deferred"]:
        raise Interrupted(_state["fired"])
