"""Identity snapshot of functions a cheating candidate would patch (a second line of defense).

Taken before the candidate is imported; checked after the import and after every call.
The decisive checks (outputs, timings) still happen on the host.
"""

from __future__ import annotations

import builtins
import sys
import threading
import time
from typing import Any


def _targets() -> dict[str, Any]:
    import torch

    found: dict[str, Any] = {
        "time.perf_counter": time.perf_counter,
        "time.perf_counter_ns": time.perf_counter_ns,
        "time.monotonic": time.monotonic,
        "time.time": time.time,
        "builtins.__import__": builtins.__import__,
        "builtins.print": builtins.print,
        "torch.allclose": torch.allclose,
        "torch.isclose": torch.isclose,
        "torch.equal": torch.equal,
        "torch.testing.assert_close": torch.testing.assert_close,
        "torch.Tensor.__eq__": torch.Tensor.__eq__,
        "torch.Tensor.copy_": torch.Tensor.copy_,
        "torch.Tensor.clone": torch.Tensor.clone,
        "torch.Tensor.contiguous": torch.Tensor.contiguous,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
    }
    triton_testing = sys.modules.get("triton.testing")
    if triton_testing is not None:
        found["triton.testing.do_bench"] = triton_testing.do_bench
    return found


class Snapshot:
    def __init__(self, own: dict[str, Any]) -> None:
        self._ids = {name: id(obj) for name, obj in {**_targets(), **own}.items()}
        self._own = own
        self._threads = threading.active_count()
        self._flags: list[str] = []

    def flag(self, what: str) -> None:
        """A violation seen by the worker's own machinery (e.g. the timer's trace went dark)."""
        self._flags.append(what)

    def violations(self) -> list[str]:
        now = {**_targets(), **self._own_now()}
        bad = [name for name, ident in self._ids.items() if id(now.get(name)) != ident]
        if sys.gettrace() is not None or threading.gettrace() is not None:
            bad.append("sys.settrace")
        if sys.getprofile() is not None or threading.getprofile() is not None:
            bad.append("sys.setprofile")
        extra = threading.active_count() - self._threads
        if extra > 0:
            bad.append(f"threads: {extra} started by the candidate")
        return sorted(bad + self._flags)

    def _own_now(self) -> dict[str, Any]:
        mod = sys.modules.get("sandboxharness.worker.runner")
        return {name: getattr(mod, name.split(".")[-1], None) for name in self._own}
