"""Worker main loop: load one module, call it on inputs it makes itself, report raw facts."""

from __future__ import annotations

import gc
import importlib
import os
import sys
import threading
import traceback
import types
from pathlib import Path
from time import perf_counter as _clock  # bound before any candidate code runs
from typing import Any

from ..inputs.tensorgen import make_inputs, make_outputs
from . import protocol
from .binding import (
    _CLONE,
    _RESHAPE,
    INPUT,
    combine,
    digest,
    input_digests,
    instance_attributes,
    plain_cpu,
)
from .integrity import Snapshot
from .launches import LaunchCounter
from .protocol import (
    Ack,
    Call,
    CallReply,
    Dump,
    DumpReply,
    Hello,
    HelloReply,
    Prepare,
    Progress,
    Recheck,
    RecheckReply,
    Sample,
    Step,
    Timed,
    TimedReply,
)

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
    extra = instance_attributes(obj)
    if extra:  # a per-instance method would run candidate code when the harness reads it
        return {"type": f"torch.Tensor with instance attributes {extra[:5]}"}
    return {"type": "torch.Tensor", "shape": list(obj.shape),
            "dtype": str(obj.dtype).removeprefix("torch."), "device": obj.device.type}


def _as_list(ret: Any) -> list[Any]:
    if isinstance(ret, (tuple, list)) and type(ret) in (tuple, list):
        return list(ret)
    return [ret]


class Worker:
    def __init__(self, chan: Channel) -> None:
        self.chan = chan
        self.fn: Any = None
        self.hello = Hello("", "", "", dps=False, preload_triton=False)
        self.snapshot: Snapshot | None = None
        self.kept: list[tuple[list[Any], list[Any], dict[str, str]]] = []
        """Timed calls: (outputs, inputs, the inputs' digests before the call) of each, held
        until the host picks the sampled ones."""
        self.held: list[tuple[str, dict[str, Any], list[Any]]] = []
        """Correctness calls: (save path, case, outputs), re-digested at ``recheck``."""
        self.bench_case: dict[str, Any] = {}
        self.gpu: Any = None  # worker.gputimer.GpuTimer on CUDA devices, else None
        self.profiler: tuple[Any, Any, Any] | None = None
        """CUDA: cudaProfilerStart, cudaProfilerStop and the marker kernel (``torch.cuda._sleep``),
        taken before the candidate loads so that a patch of torch cannot change them."""
        self.launches = LaunchCounter()

    # -- one call of the candidate --------------------------------------------------------
    def _outputs(self, case: dict[str, Any]) -> list[Any]:
        return make_outputs(case, self.hello.device) if self.hello.dps else []

    def _inputs(self, case: dict[str, Any], seed: int) -> list[Any]:
        return make_inputs(case, seed, self.hello.device, self.hello.data)

    def _invoke(self, inputs: list[Any], case: dict[str, Any],
                profile: bool = False) -> tuple[list[Any], float]:
        device = self.hello.device
        marked = self.profiler if profile else None
        outs = self._outputs(case)
        if self.gpu is not None:
            self.gpu.remember(inputs)
        _sync(device)
        gc.disable()  # in every phase alike (no tell), until the call's results are sent
        if marked is not None:  # under ncu: profile this call's kernels, after the marker
            marked[0]()
            marked[2](1)
        t0 = _clock()
        ret = self.fn(*inputs, *outs)
        _sync(device)
        elapsed = _clock() - t0
        if marked is not None:
            marked[1]()
        return (outs if self.hello.dps else _as_list(ret)), elapsed

    def _named(self, case: dict[str, Any], outs: list[Any],
               inputs: list[Any] | None) -> dict[str, Any]:
        named = {f"out.{o['name']}": v for o, v in zip(case["outputs"], outs, strict=False)}
        if inputs is not None:
            named.update({f"in.{it['name']}": v
                          for it, v in zip(case["inputs"], inputs, strict=True)})
        return named

    @staticmethod
    def _bind(named: dict[str, Any]) -> dict[str, str]:
        """Digests of the outputs, of each input (``in.<name>``) and of all inputs (``in``,
        combined): of the tensors as they are now, read through unbound methods, no copy kept."""
        import torch

        plain = {k: v for k, v in named.items() if type(v) is torch.Tensor}
        per = input_digests(plain)
        return {"out": digest({k: v for k, v in plain.items() if k.startswith("out.")}),
                "in": combine(per), **per}

    def _results(self, named: dict[str, Any],
                 pre: dict[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
        """(bound, what the result file holds): the outputs, and only the inputs whose digest
        moved from ``pre`` (the host knows an unchanged input by its digest alone)."""
        import torch

        live = {k: v for k, v in named.items()
                if type(v) is torch.Tensor and not instance_attributes(v)}
        cpu = {k: plain_cpu(v) for k, v in live.items()}
        bound = self._bind(cpu)
        # own copies: an output may share storage with an input (in-place kernels), which
        # the file format refuses, and nothing of the candidate's may be read later; a copy
        # off the device already is one
        keep = {k: t if live[k].device.type != "cpu" else _CLONE(t) for k, t in cpu.items()
                if not k.startswith(INPUT) or bound.get(k) != pre.get(k)}
        return bound, keep

    @staticmethod
    def _write(path: str, plain: dict[str, Any]) -> None:
        from safetensors.torch import save

        data = save(plain)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def _save(self, path: str, named: dict[str, Any], pre: dict[str, str]) -> dict[str, str]:
        bound, keep = self._results(named, pre)
        self._write(path, keep)
        return bound

    def _pre(self, case: dict[str, Any], inputs: list[Any]) -> dict[str, str]:
        """Each input's digest as made, before any candidate code sees it."""
        return input_digests(self._named(case, [], inputs))

    def _progress(self, frame: Progress) -> None:
        self.chan.send(frame.to_wire())

    # -- ops ------------------------------------------------------------------------------
    def op_hello(self, req: Hello) -> HelloReply:
        self.hello = req
        own = {f"runner.{n}": getattr(sys.modules[__name__], n) for n in ("_clock", "_sync")}
        import torch

        torch.set_num_threads(1)
        if req.preload_triton:
            import triton.testing  # noqa: F401  (so do_bench is in the snapshot)

            self.launches.install()
        for var, sub in (req.env_in_out or {}).items():  # trusted baselines only
            os.environ[var] = str(Path(req.out) / sub)
        if req.device.startswith("cuda"):
            from .gputimer import GpuTimer

            self.gpu = GpuTimer()
            rt = torch.cuda.cudart()  # type: ignore[no-untyped-call]
            self.profiler = (rt.cudaProfilerStart, rt.cudaProfilerStop, torch.cuda._sleep)
        import safetensors.torch  # noqa: F401  (the saver is in the snapshot)

        self.snapshot = Snapshot(own)
        self.snapshot.watch(self.launches)
        t0 = _clock()
        if req.native:  # built here, inside the sandbox, under the compile timeout
            from .gpu import load_native

            self.fn, build = load_native(req)
            return HelloReply(_clock() - t0, build)
        self.fn = _load(req.src, req.entry_file, req.entry_func)
        return HelloReply(_clock() - t0)

    def op_call(self, req: Call) -> CallReply:
        case = req.case
        inputs = self._inputs(case, req.seed)
        pre = self._pre(case, inputs)
        self.launches.take()
        outs, elapsed = self._invoke(inputs, case, req.profile)
        gc.disable()  # again, should the call have switched it on: none until the reply
        launches = self.launches.take()
        described = [_describe(o) for o in outs]
        bound = self._save(req.save, self._named(case, outs, inputs), pre)
        self.held.append((req.save, case, outs))
        return CallReply(described, len(outs), elapsed, bound, launches, pre)

    def op_sample(self, req: Sample) -> CallReply:
        """One call as ``call`` (its results bound at once, in a frame), then up to ``calls``
        more on the batch tiled ``tile`` times, within ``budget_s``; the first output of each
        is stacked as ``rep.<name>``."""
        import torch

        case, rep_spec = req.call.case, req.repeat
        tile, tiled_case = rep_spec.tile, rep_spec.tiled_case
        inputs = self._inputs(case, req.call.seed)
        pre = self._pre(case, inputs)
        self.launches.take()
        outs, elapsed = self._invoke(inputs, case)
        gc.disable()
        launches = self.launches.take()
        described = [_describe(o) for o in outs]
        bound, first = self._results(self._named(case, outs, inputs), pre)
        self._progress(Progress(Step.BOUND, digests=bound))
        self.held.append((req.call.save, case, outs))
        names = set(rep_spec.tile_inputs)
        tiled = [torch.Tensor.repeat(v, tile, *([1] * (v.dim() - 1)))
                 if it["name"] in names and type(v) is torch.Tensor else v
                 for it, v in zip(case["inputs"], inputs, strict=True)]
        out0 = case["outputs"][0]
        reps: list[Any] = []
        budget, t_start = rep_spec.budget_s, _clock()
        for _ in range(rep_spec.calls):
            if reps and _clock() - t_start > budget:
                break  # what it has is judged; the details say how many samples per row
            got, _ = self._invoke(tiled, tiled_case)
            if not got or type(got[0]) is not torch.Tensor or instance_attributes(got[0]):
                raise TypeError(f"repeated call returned no plain tensor for {out0['name']!r}")
            reps.append(_RESHAPE(_CLONE(plain_cpu(got[0])), (tile, *out0["shape"])))
        rep = {f"rep.{out0['name']}": torch.cat(reps)}
        self._write(req.call.save, {**first, **rep})
        bound["rep"] = digest(rep)
        return CallReply(described, len(outs), elapsed, bound, launches, pre)

    def op_recheck(self, req: Recheck) -> RecheckReply:
        """Digests of every earlier call's outputs now: an output that aliases storage the
        candidate reused or rewrote since its call no longer matches what was bound then."""
        gc.disable()
        now = {path: self._bind(self._named(case, outs, None))["out"]
               for path, case, outs in self.held}
        self.held = []
        return RecheckReply(now)

    def op_prepare(self, req: Prepare) -> Ack:
        self.bench_case = req.case
        for _ in range(req.warmup):
            self._invoke(self._inputs(req.case, req.warmup_seed), req.case)
        return Ack()

    def _ready(self, i: int, seed: int) -> tuple[list[Any], dict[str, str]]:
        """Inputs of timed call ``i``, made only now (nothing staged for the candidate to walk
        to), moved off any address it has seen, digested and announced before the call."""
        inputs = self._inputs(self.bench_case, seed)
        if self.gpu is not None:
            self.gpu.fresh([inputs])
        gc.disable()
        pre = self._pre(self.bench_case, inputs)
        self._progress(Progress(Step.READY, i, {"in": combine(pre), **pre}))
        _sync(self.hello.device)
        self.launches.take()
        return inputs, pre

    def _after(self, i: int, outs: list[Any], inputs: list[Any], pre: dict[str, str]) -> None:
        """Right after timed call ``i``: say it is done, then bind its outputs and inputs."""
        gc.disable()
        self._progress(Progress(Step.DONE, i, launches=self.launches.take()))
        named = self._named(self.bench_case, outs, inputs)
        self._progress(Progress(Step.BOUND, i, self._bind(named),
                                described=[_describe(o) for o in outs]))
        self.kept.append((outs, inputs, pre))

    def op_timed(self, req: Timed) -> TimedReply:
        seeds = req.seeds
        self.kept = []
        clock: dict[str, Any] = {}
        if self.gpu is not None:
            times, clock = self._timed_gpu(seeds)
        else:
            times = []
            for i, seed in enumerate(seeds):
                inputs, pre = self._ready(i, seed)
                outs, elapsed = self._invoke(inputs, self.bench_case)
                self._after(i, outs, inputs, pre)
                times.append(elapsed)
        gc.disable()
        re_out = [self._bind(self._named(self.bench_case, o, None))["out"]
                  for o, _, _ in self.kept]
        return TimedReply(times, re_out, clock)

    def _timed_gpu(self, seeds: list[int]) -> tuple[list[float], dict[str, Any]]:
        """do_bench-style CUDA events, cold L2, fresh input addresses, every stream counted
        (CUPTI, or the device-sync floor without it: see worker.gputimer.GpuTimer)."""
        case = self.bench_case
        current: dict[int, tuple[list[Any], list[Any], dict[str, str]]] = {}

        def make(i: int) -> Any:
            inputs, pre = self._ready(i, seeds[i])
            outs = self._outputs(case)
            current[i] = (inputs, outs, pre)
            return lambda: self.fn(*inputs, *outs)

        def after(i: int, ret: Any) -> None:
            inputs, outs, pre = current.pop(i)
            self._after(i, outs if self.hello.dps else _as_list(ret), inputs, pre)

        _, times, info = self.gpu.time_made(len(seeds), make, after)
        if info.get("trace_lost") and self.snapshot is not None:
            self.snapshot.flag(f"CUPTI recorded nothing in {info['trace_lost']} timed calls "
                               "(tracing switched off or its buffers taken)")
        return times, info

    def op_dump(self, req: Dump) -> DumpReply:
        gc.disable()
        bound = []
        for idx, path in zip(req.indices, req.paths, strict=True):
            outs, inputs, pre = self.kept[idx]
            bound.append(self._save(path, self._named(self.bench_case, outs, inputs), pre))
        self.kept = []
        return DumpReply(bound)

    def serve(self) -> None:
        gc_was = gc.isenabled()
        while True:
            try:
                msg = self.chan.recv()
            except EOFError:
                return
            if msg.get("op") == protocol.Op.BYE:
                self.chan.send(Ack().to_wire())
                return
            try:
                req = protocol.request_from_wire(msg)  # ValueError: an unknown op
                reply = getattr(self, f"op_{req.OP.value}")(req).to_wire()
            except BaseException as exc:  # noqa: BLE001  the candidate's failure is data
                text = "".join(traceback.format_exception(exc))[-_MAX_ERROR:]
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500],
                         "traceback": text}
            if self.snapshot is not None:
                reply["integrity"] = self.snapshot.violations()
                reply["threads"] = threading.active_count()
            self.chan.send(reply)
            if gc_was:  # results are on the channel: the collector may run again
                gc.enable()
