"""The host's side of the worker contract: one typed method per op (``worker.protocol``), and
the hello of each role built in one place.

Replies are read through the protocol's ``from_wire``: only well-typed values reach a stage,
and none of them is trusted (the stages judge the files and the host's own clock).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..models import Solution
from ..models.verdict import ReasonCode
from ..sandbox.interface import ExitInfo
from ..worker import protocol
from ..worker.protocol import (
    Call,
    CallReply,
    Dump,
    DumpReply,
    Hello,
    HelloReply,
    Prepare,
    Progress,
    RecheckReply,
    Repeat,
    Sample,
    TimedReply,
)
from . import hwstate
from .lanes import NO_LANE, GpuLane
from .session import WorkerSession

OnProgress = Callable[[Progress, float], None]
"""Gets each progress frame of a ``timed`` batch with the host's clock at its arrival."""


@dataclass(frozen=True)
class TimedBatch:
    reply: TimedReply
    gpu_state: dict[str, Any] = field(default_factory=dict)
    """The GPU around the window (``hwstate`` summary: clocks, throttling, other processes);
    empty on CPU."""


def hello_for_candidate(solution: Solution) -> Hello:
    """What the worker is told about a candidate (its runs and the sanitizer's)."""
    spec = solution.spec
    return Hello("candidate", spec.entry_file, spec.entry_function,
                 dps=spec.destination_passing_style,
                 preload_triton=spec.language.value == "triton", language=spec.language.value,
                 binding=spec.binding.value if spec.binding else None,
                 build_key=solution.content_hash())


def hello_for_reference() -> Hello:
    """The definition's reference: ``reference.py::run``, returning its outputs."""
    return Hello("reference", "reference.py", "run", dps=False, preload_triton=False)


def hello_for_baseline(entry_file: str, *, env_in_out: Mapping[str, str] | None = None) -> Hello:
    """A trusted baseline adapter (``entry_file::run``, Python, returning its outputs);
    ``env_in_out``: environment variables the worker points at sub-directories of its out."""
    return Hello("baseline", entry_file, "run", dps=False, preload_triton=False,
                 language="python", env_in_out=dict(env_in_out) if env_in_out else None)


class WorkerClient:
    """Typed ops over one worker's session. Every method raises ``KernelFault`` as
    ``WorkerSession.request`` does; a failed hello with COMPILE_ERROR, any other op with
    RUNTIME_ERROR. GPU work holds the lane shared; a timed batch holds it exclusive."""

    def __init__(self, session: WorkerSession, lane: GpuLane = NO_LANE) -> None:
        self.session = session
        self.lane = lane
        self.device = "cpu"

    def hello(self, hello: Hello, *, device: str, timeout_s: float) -> HelloReply:
        """Load (or build) the role's code; the job's paths are the sandbox's view."""
        paths = self.session.paths
        msg = hello.for_job(src=paths.src, data=paths.data, out=paths.out, device=device)
        self.device = device
        with self.lane.shared():
            reply = self.session.request(msg.to_wire(), timeout_s,
                                         fail_code=ReasonCode.COMPILE_ERROR)
        return HelloReply.from_wire(reply)

    def call(self, call: Call, *, timeout_s: float) -> CallReply:
        with self.lane.shared():
            return CallReply.from_wire(self.session.request(call.to_wire(), timeout_s))

    def sample(self, call: Call, repeat: Repeat, *, timeout_s: float) -> CallReply:
        """A ``call`` and its repeats. The reply's ``bound`` holds the first call's digests as
        the worker sent them before any repeated call ran, and the samples' ``rep``."""
        first: protocol.Digests = {}

        def bound_frame(frame: dict[str, object], _at: float) -> None:
            first.update(Progress.from_wire(frame).digests)

        with self.lane.shared():
            raw = self.session.request(Sample(call, repeat).to_wire(), timeout_s,
                                       on_progress=bound_frame, max_progress=1)
        reply = CallReply.from_wire(raw)
        rep = protocol.digests(raw.get("bound"), ("rep",))
        return replace(reply, bound={**first, **rep})

    def recheck(self, *, timeout_s: float) -> RecheckReply:
        return RecheckReply.from_wire(self.session.request(protocol.Recheck().to_wire(),
                                                           timeout_s))

    def prepare(self, prepare: Prepare, *, timeout_s: float) -> None:
        with self.lane.shared():
            self.session.request(prepare.to_wire(), timeout_s)

    def timed(self, seeds: list[int], *, timeout_s: float, on_progress: OnProgress) -> TimedBatch:
        """One timed call per seed; each sends ``ready``, ``done`` and ``bound`` frames. On a
        GPU the lane is held exclusive and NVML watches the window."""
        def frame(raw: dict[str, object], at: float) -> None:
            on_progress(Progress.from_wire(raw), at)

        msg = protocol.Timed(seeds).to_wire()
        with self.lane.exclusive():  # nothing else of the harness on this GPU meanwhile
            if self.device == "cpu":
                reply = self.session.request(msg, timeout_s, on_progress=frame,
                                             max_progress=3 * len(seeds))
                return TimedBatch(TimedReply.from_wire(reply))
            # NVML numbers GPUs in PCI order; CUDA_DEVICE_ORDER=PCI_BUS_ID keeps them one.
            # This harness's own jobs are known (the lane holds their requests off); any other
            # process with a context on the GPU is foreign.
            with hwstate.open_window(self.lane.index or 0,
                                     [os.getpid(), *self.session.proc.host_pids()]) as window:
                reply = self.session.request(msg, timeout_s, on_progress=frame,
                                             max_progress=3 * len(seeds))
        return TimedBatch(TimedReply.from_wire(reply), window.summary())

    def dump(self, indices: list[int], paths: list[str], *, timeout_s: float) -> DumpReply:
        with self.lane.shared():
            return DumpReply.from_wire(self.session.request(Dump(indices, paths).to_wire(),
                                                            timeout_s))

    def bye(self, *, timeout_s: float) -> None:
        """Ask the worker to leave and wait for its answer (``close`` does not wait)."""
        self.session.request(protocol.Bye().to_wire(), timeout_s)

    def close(self) -> ExitInfo:
        return self.session.close()
