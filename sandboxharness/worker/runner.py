"""Worker main loop: load one module, call it on inputs it makes itself, report raw facts."""

from __future__ import annotations

import importlib
import os
import sys
import threading
import traceback
import types
from pathlib import Path
from time import perf_counter as _clock  # bound before any candidate code runs
from typing import Any

from . import protocol
from .integrity import Snapshot
from .tensorgen import make_inputs, make_outputs

_MAX_ERROR = 4000


class Channel:
    """The private request/reply channel: fds the worker took over before the candidate ran."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd

    def _read_exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = os.read(self.rfd, n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def recv(self) -> dict[str, Any]:
        size = protocol.parse_header(self._read_exact(protocol.HEADER))
        return protocol.decode(self._read_exact(size))

    def send(self, msg: dict[str, Any]) -> None:
        data = protocol.encode(msg)
        while data:
            data = data[os.write(self.wfd, data):]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


_PKG = "candidate"


def _load(src_dir: str, entry_file: str, func: str) -> Any:
    """Import the entry file as a module of a package rooted at ``src_dir``, so multi-file
    solutions work with relative imports (``from .kernel import k``) and absolute ones."""
    sys.path.insert(0, src_dir)
    pkg = types.ModuleType(_PKG)
    pkg.__path__ = [src_dir]
    sys.modules[_PKG] = pkg
    parts = Path(entry_file).with_suffix("").parts
    if not parts or not all(p.isidentifier() for p in parts):
        raise ImportError(f"entry file {entry_file!r} is not an importable module path")
    module = importlib.import_module(".".join((_PKG, *parts)))
    fn = getattr(module, func, None)
    if not callable(fn):
        raise AttributeError(f"entry point {entry_file}::{func} is not a function")
    return fn


def _describe(obj: Any) -> dict[str, Any]:
    import torch

    if type(obj) is not torch.Tensor:  # exact type: subclasses can lie through methods
        return {"type": f"{type(obj).__module__}.{type(obj).__qualname__}"}
    return {"type": "torch.Tensor", "shape": list(obj.shape),
            "dtype": str(obj.dtype).removeprefix("torch."), "device": obj.device.type}


class Worker:
    def __init__(self, chan: Channel) -> None:
        self.chan = chan
        self.fn: Any = None
        self.hello: dict[str, Any] = {}
        self.snapshot: Snapshot | None = None
        self.kept: list[Any] = []
        self.prepared: list[list[Any]] = []
        self.gpu: Any = None  # worker.gputimer.GpuTimer on CUDA devices, else None

    # -- one call of the candidate --------------------------------------------------------
    def _invoke(self, inputs: list[Any], case: dict[str, Any]) -> tuple[list[Any], float]:
        dps = self.hello["dps"]
        device = self.hello["device"]
        outs = make_outputs(case, device) if dps else []
        if self.gpu is not None:
            self.gpu.remember(inputs)
        _sync(device)
        t0 = _clock()
        ret = self.fn(*inputs, *outs)
        _sync(device)
        elapsed = _clock() - t0
        if dps:
            return outs, elapsed
        if isinstance(ret, (tuple, list)) and type(ret) in (tuple, list):
            return list(ret), elapsed
        return [ret], elapsed

    def _save(self, path: str, named: dict[str, Any]) -> None:
        import torch
        from safetensors.torch import save_file

        plain = {k: v.detach().to("cpu").contiguous().clone() for k, v in named.items()
                 if type(v) is torch.Tensor}
        save_file(plain, path)

    # -- ops ------------------------------------------------------------------------------
    def op_hello(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.hello = msg
        own = {f"runner.{n}": getattr(sys.modules[__name__], n) for n in ("_clock", "_sync")}
        import torch

        torch.set_num_threads(1)
        if msg.get("preload_triton"):
            import triton.testing  # noqa: F401  (so do_bench is in the snapshot)
        native = msg.get("language") in ("cuda", "cpp")
        for var, sub in (msg.get("env_in_out") or {}).items():  # trusted baselines only
            os.environ[str(var)] = str(Path(msg["out"]) / str(sub))
        if msg["device"].startswith("cuda"):
            from .gputimer import GpuTimer

            self.gpu = GpuTimer()
        self.snapshot = Snapshot(own)
        t0 = _clock()
        if native:  # built here, inside the sandbox, under the compile timeout
            from .gpu import load_native

            self.fn, build = load_native(msg)
            return {"ok": True, "import_s": _clock() - t0, "build": build}
        self.fn = _load(msg["src"], msg["entry_file"], msg["entry_func"])
        return {"ok": True, "import_s": _clock() - t0}

    def op_call(self, msg: dict[str, Any]) -> dict[str, Any]:
        case = msg["case"]
        inputs = make_inputs(case, msg["seed"], self.hello["device"], self.hello["data"])
        outs, elapsed = self._invoke(inputs, case)
        names = [o["name"] for o in case["outputs"]]
        described = [_describe(o) for o in outs]
        named = {f"out.{n}": o for n, o in zip(names, outs, strict=False)}
        named.update({f"in.{it['name']}": v for it, v in zip(case["inputs"], inputs, strict=True)})
        self._save(msg["save"], named)
        return {"ok": True, "outputs": described, "n_outputs": len(outs), "elapsed_s": elapsed}

    def op_prepare(self, msg: dict[str, Any]) -> dict[str, Any]:
        case = msg["case"]
        self.bench_case = case
        self.prepared = [make_inputs(case, s, self.hello["device"], self.hello["data"])
                         for s in msg["seeds"]]
        for _ in range(msg.get("warmup", 0)):
            self._invoke(make_inputs(case, msg["warmup_seed"], self.hello["device"],
                                     self.hello["data"]), case)
        return {"ok": True, "n": len(self.prepared)}

    def op_timed(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.gpu is not None:
            return self._timed_gpu()
        times, self.kept = [], []
        for inputs in self.prepared:
            outs, elapsed = self._invoke(inputs, self.bench_case)
            times.append(elapsed)
            self.kept.append(outs)
        self.prepared = []
        return {"ok": True, "times_s": times}

    def _timed_gpu(self) -> dict[str, Any]:
        """do_bench-style CUDA events, cold L2, fresh input addresses, every stream counted
        (CUPTI, or the device-sync floor without it: see worker.gputimer.GpuTimer)."""
        case, dps = self.bench_case, self.hello["dps"]
        moved = self.gpu.fresh(self.prepared)
        outs = [make_outputs(case, self.hello["device"]) if dps else []
                for _ in self.prepared]
        calls = [lambda i=i, o=o: self.fn(*i, *o)
                 for i, o in zip(self.prepared, outs, strict=True)]
        rets, times, info = self.gpu.time_calls(calls)
        if info.get("trace_lost") and self.snapshot is not None:
            self.snapshot.flag(f"CUPTI recorded nothing in {info['trace_lost']} timed calls "
                               "(tracing switched off or its buffers taken)")
        self.kept = []
        for ret, o in zip(rets, outs, strict=True):
            if dps:
                self.kept.append(o)
            elif isinstance(ret, (tuple, list)) and type(ret) in (tuple, list):
                self.kept.append(list(ret))
            else:
                self.kept.append([ret])
        self.prepared = []
        return {"ok": True, "times_s": times, "clock": info, "moved_inputs": moved}

    def op_dump(self, msg: dict[str, Any]) -> dict[str, Any]:
        names = [o["name"] for o in self.bench_case["outputs"]]
        for idx, path in zip(msg["indices"], msg["paths"], strict=True):
            outs = self.kept[idx]
            self._save(path, {f"out.{n}": o for n, o in zip(names, outs, strict=False)})
        self.kept = []
        return {"ok": True}

    def serve(self) -> None:
        while True:
            try:
                msg = self.chan.recv()
            except EOFError:
                return
            op = msg.get("op")
            if op == "bye":
                self.chan.send({"ok": True})
                return
            handler = getattr(self, f"op_{op}", None)
            try:
                if handler is None:
                    raise ValueError(f"unknown op {op!r}")
                reply = handler(msg)
            except BaseException as exc:  # noqa: BLE001  the candidate's failure is data
                text = "".join(traceback.format_exception(exc))[-_MAX_ERROR:]
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500],
                         "traceback": text}
            if self.snapshot is not None:
                reply["integrity"] = self.snapshot.violations()
                reply["threads"] = threading.active_count()
            self.chan.send(reply)
