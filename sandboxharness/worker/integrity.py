"""Identity snapshot of functions a cheating candidate would patch (a second line of defense).

Taken before the candidate is imported; checked after the import and after every call.
The decisive checks (outputs, timings) still happen on the host.
"""

from __future__ import annotations

import builtins
import gc
import hashlib
import json
import os
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_OWN_PACKAGES = ("sandboxharness.worker", "sandboxharness.inputs")
"""The harness code loaded in the worker: its own modules and the input generator."""


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
        "torch.Tensor.detach": torch.Tensor.detach,
        "torch.Tensor.to": torch.Tensor.to,
        "torch.Tensor.view": torch.Tensor.view,
        "torch.Tensor.reshape": torch.Tensor.reshape,
        "torch.Tensor.numpy": torch.Tensor.numpy,
        "torch.Tensor.data_ptr": torch.Tensor.data_ptr,
        "torch.empty": torch.empty,
        "torch.randn": torch.randn,
        "torch.randint": torch.randint,
        "torch.Generator": torch.Generator,
        "hashlib.sha256": hashlib.sha256,
        "concurrent.futures.ThreadPoolExecutor.map": ThreadPoolExecutor.map,
        "concurrent.futures.ThreadPoolExecutor.submit": ThreadPoolExecutor.submit,
        "json.dumps": json.dumps,
        "json.loads": json.loads,
        "os.write": os.write,
        "os.read": os.read,
        "os.open": os.open,
        "gc.disable": gc.disable,
        "gc.enable": gc.enable,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
    }
    triton_testing = sys.modules.get("triton.testing")
    if triton_testing is not None:
        found["triton.testing.do_bench"] = triton_testing.do_bench
    st = sys.modules.get("safetensors.torch")
    if st is not None:
        found["safetensors.torch.save"] = st.save
        found["safetensors.torch.load"] = st.load
    found.update(_worker_functions())
    return found


def _worker_functions() -> dict[str, Any]:
    """Every function and method of the worker's own modules: the harness code on the call
    path a candidate could reach (the channel, the saver, the digests, the timer, the input
    generator)."""
    found: dict[str, Any] = {}
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not mod_name.startswith(_OWN_PACKAGES):
            continue
        for name, obj in list(vars(mod).items()):
            if isinstance(obj, type) and obj.__module__ == mod_name:
                for attr, member in list(vars(obj).items()):
                    if callable(member) or isinstance(member, (staticmethod, classmethod)):
                        found[f"{mod_name}.{name}.{attr}"] = member
            elif callable(obj) and not isinstance(obj, types.ModuleType):
                found[f"{mod_name}.{name}"] = obj  # imported names too: the ones it calls
    return found


def _modes() -> list[str]:
    """Torch function / dispatch modes left active: they would intercept the harness's own
    tensor operations after the call."""
    import torch

    bad = []
    if torch._C._len_torch_function_stack() > 0:
        bad.append("torch function mode left active")
    if torch._C._len_torch_dispatch_stack() > 0:
        bad.append("torch dispatch mode left active")
    return bad


class Snapshot:
    def __init__(self, own: dict[str, Any]) -> None:
        self._ids = {name: id(obj) for name, obj in {**_targets(), **own}.items()}
        self._own = own
        self._threads = threading.active_count()
        self._flags: list[str] = []
        self._hooks: list[Any] = []
        self._gc_callbacks = list(gc.callbacks)

    def watch(self, hooks: Any) -> None:
        """Harness hooks (e.g. the launch counter) whose ``intact()`` must stay empty."""
        self._hooks.append(hooks)

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
        if any(cb not in self._gc_callbacks for cb in gc.callbacks):
            bad.append("gc.callbacks registered")
        bad.extend(_modes())
        for hooks in self._hooks:
            bad.extend(hooks.intact())
        return sorted(bad + self._flags)

    def _own_now(self) -> dict[str, Any]:
        mod = sys.modules.get("sandboxharness.worker.runner")
        return {name: getattr(mod, name.split(".")[-1], None) for name in self._own}
