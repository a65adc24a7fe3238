"""Drive one sandboxed worker (candidate or reference) through a plan; record raw facts only.

Every call's results are bound when the call returns: the worker sends their digests on the
channel (the reply of a correctness call; ``ready``/``done``/``bound`` frames around each
timed call) before any more candidate code runs, and the host holds them (see
``worker.binding``).
"""

from __future__ import annotations

import secrets
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..models.policy import Policy
from ..models.verdict import ReasonCode
from ..sandbox.interface import ExitInfo, JobSpec, Sandbox
from ..worker.protocol import Call, CallReply, Digests, Hello, Prepare, Progress, Repeat, Step
from .cases import Case, derive_seed
from .client import WorkerClient
from .lanes import NO_LANE, GpuLane
from .session import KernelFault, WorkerSession

EXTRA_WARMUP = 3
"""Up to this many warm-up calls beyond the policy's, chosen per workload in secret, so a
candidate cannot count its way to the first timed call."""


@dataclass
class CallResult:
    case: Case
    trial: int
    seed: int
    file: Path | None = None
    reply: CallReply | None = None
    error: str | None = None
    bound: Digests = field(default_factory=dict)
    """Digests the worker sent right after the call: ``out`` and ``in`` (post-call inputs)."""
    sampled_index: int | None = None
    """Set for the re-check of a timed call: its index in the workload's timed batch (its
    ``trial`` is then -1)."""
    launches: int | None = None
    """Triton kernels the call launched (worker-counted; None where not counted)."""


@dataclass
class TimedCall:
    """What the host learned about one timed call while it happened."""

    pre_in: str = ""
    """Digest of the inputs as made, announced before the call."""
    bound: Digests = field(default_factory=dict)
    described: list[Any] = field(default_factory=list)
    launches: int | None = None
    host_span_s: float = 0.0
    """Host clock from the ``ready`` frame to the ``done`` frame (call, sync, flush)."""
    re_out: str = ""
    """Digest of its outputs after the whole batch."""
    kernels: list[str] | None = None
    """Names of the GPU kernels it launched (CUPTI records; None where not traced)."""


@dataclass
class BenchResult:
    case: Case
    seeds: list[int]
    times_s: list[float] = field(default_factory=list)
    host_elapsed_s: float = 0.0
    sampled: dict[int, Path] = field(default_factory=dict)
    clock: dict[str, Any] = field(default_factory=dict)
    """How the worker says it timed (GPU): informational, never trusted for a decision."""
    calls: list[TimedCall] = field(default_factory=list)
    dumped: dict[int, Digests] = field(default_factory=dict)
    gpu_state: dict[str, Any] = field(default_factory=dict)
    """The GPU during the window (``stages.hwstate``); empty on CPU."""
    retimed: str | None = None
    """Why the batch was timed again (the first window's flag), if it was."""


@dataclass
class RoleRun:
    role: str
    import_s: float | None = None
    calls: list[CallResult] = field(default_factory=list)
    benches: list[BenchResult] = field(default_factory=list)
    fault: KernelFault | None = None
    fault_phase: str | None = None
    exit: ExitInfo | None = None
    wall_s: dict[str, float] = field(default_factory=dict)
    rechecked: dict[str, str] = field(default_factory=dict)
    """Result file name -> digest of that call's outputs after every correctness call."""


@dataclass(frozen=True)
class Plan:
    cases: list[Case]
    bench_cases: list[Case]
    trials: int
    seed: int
    device: str
    policy: Policy
    sampled: dict[str, list[int]] = field(default_factory=dict)
    """Reference only: which timed-call indices of each bench case the candidate dumped."""
    sample: dict[str, Repeat] = field(default_factory=dict)
    lane: GpuLane = NO_LANE
    """Candidate only: case id -> how the first trial's call is repeated (a ``sample``
    request: stochastic outputs; see ``stages.repeats``)."""

    def trial_seed(self, case: Case, trial: int) -> int:
        return derive_seed(self.seed, "trial", case.id, trial)

    def bench_seeds(self, case: Case) -> list[int]:
        n = self.policy.benchmark.iterations
        return [derive_seed(self.seed, "bench", case.id, i) for i in range(n)]


def run_role(sandbox: Sandbox, job: JobSpec, hello: Hello, plan: Plan,
             time_it: bool = True) -> RoleRun:
    """Run everything one role needs in ONE sandboxed process, stopping at the first fault."""
    lim = plan.policy.limits
    run = RoleRun(role=job.role)
    t_start = time.monotonic()
    proc = sandbox.start(job, deadline_s=lim.compile_timeout_s + lim.run_timeout_s)
    worker = WorkerClient(WorkerSession(proc, lim.compile_timeout_s + lim.run_timeout_s),
                          plan.lane)
    out_dir = proc.paths.out
    phase = "compile"
    try:
        run.import_s = worker.hello(hello, device=plan.device,
                                    timeout_s=lim.compile_timeout_s).import_s
        run.wall_s["compile"] = time.monotonic() - t_start
        phase, t0 = "correctness", time.monotonic()
        _calls(worker, run, plan, out_dir)
        run.wall_s["correctness"] = time.monotonic() - t0
        if time_it:
            phase, t0 = "benchmark", time.monotonic()
            _benches(worker, run, plan, out_dir, job.role)
            run.wall_s["benchmark"] = time.monotonic() - t0
    except KernelFault as fault:
        run.fault, run.fault_phase = fault, phase
    finally:
        run.exit = worker.close()
    return run


def _call(worker: WorkerClient, run: RoleRun, result: CallResult, out_dir: str, *,
          timeout: float, repeat: Repeat | None = None) -> None:
    tag = f"b{result.sampled_index}" if result.sampled_index is not None else f"t{result.trial}"
    name = f"{result.case.id}_{tag}.safetensors"
    call = Call(result.case.payload, result.seed, f"{out_dir}/{name}")
    try:
        if repeat is None:
            result.reply = worker.call(call, timeout_s=timeout)
        else:  # bound: the first call's results as bound before the repeated calls ran
            result.reply = worker.sample(call, repeat, timeout_s=timeout)
        result.file = Path(name)
        result.bound = dict(result.reply.bound)
        result.launches = result.reply.launches
    except KernelFault as fault:
        if fault.code != ReasonCode.RUNTIME_ERROR:
            raise
        result.error = fault.message
    run.calls.append(result)


def _calls(worker: WorkerClient, run: RoleRun, plan: Plan, out_dir: str) -> None:
    timeout = plan.policy.limits.run_timeout_s
    order = [(case, trial) for case in plan.cases for trial in range(plan.trials)]
    secrets.SystemRandom().shuffle(order)  # no fixed call order to count along
    for case, trial in order:
        _call(worker, run, CallResult(case, trial, plan.trial_seed(case, trial)), out_dir,
              timeout=timeout, repeat=plan.sample.get(case.id) if trial == 0 else None)
    # the reference also computes the outputs of the candidate's sampled timed calls
    for case in plan.bench_cases:
        seeds = plan.bench_seeds(case)
        for idx in plan.sampled.get(case.id, []):
            _call(worker, run, CallResult(case, -1, seeds[idx], sampled_index=idx), out_dir,
                  timeout=timeout)
    if run.calls:
        now = worker.recheck(timeout_s=timeout).digests
        run.rechecked = {Path(k).name: v for k, v in now.items()}


def _clock_info(raw: Any) -> dict[str, Any]:
    """The worker's account of its timing method, kept to known keys and plain values."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("method", "cupti_error"):
        if isinstance(raw.get(key), str):
            out[key] = raw[key][:300]
    for key in ("other_streams_longer", "off_stream_calls", "trace_lost", "flush_bytes",
                "event_cost_s", "sync_floor_s", "floor_jitter_s"):
        if isinstance(raw.get(key), (int, float)) and not isinstance(raw.get(key), bool):
            out[key] = raw[key]
    stream = raw.get("stream_s")
    if isinstance(stream, list) and stream and all(
            isinstance(t, (int, float)) and t >= 0 for t in stream):
        out["stream_median_ms"] = statistics.median(stream) * 1e3
    return out


class _TimedFrames:
    """Collects the ``ready``/``done``/``bound`` frames of one timed batch, in order."""

    def __init__(self, n: int) -> None:
        self.calls = [TimedCall() for _ in range(n)]
        self._ready_at: float | None = None
        self._next: tuple[int | None, str] = (0, Step.READY)

    def __call__(self, frame: Progress, at: float) -> None:
        i, step = frame.i, frame.step
        if (i, step) != self._next or i is None:
            raise KernelFault(ReasonCode.WORKER_PROTOCOL,
                              f"timed frame {step!r} #{i} out of order (expected "
                              f"{(self._next[0], str(self._next[1]))})")
        call = self.calls[i]
        if step == Step.READY:
            call.pre_in = frame.digests.get("in", "")
            self._ready_at, self._next = at, (i, Step.DONE)
        elif step == Step.DONE:
            call.host_span_s = at - (self._ready_at or at)
            call.launches = frame.launches
            self._next = (i, Step.BOUND)
        else:
            call.bound = frame.digests
            call.described = frame.described or []
            self._next = (i + 1, Step.READY)

    def complete(self) -> bool:
        return self._next == (len(self.calls), Step.READY)


def _kernel_names(bench: BenchResult, clock: dict[str, Any]) -> None:
    names = clock.get("kernel_names")
    if isinstance(names, list) and len(names) == len(bench.calls):
        for call, got in zip(bench.calls, names, strict=True):
            if isinstance(got, list):
                call.kernels = [str(n)[:200] for n in got[:16]]


def _benches(worker: WorkerClient, run: RoleRun, plan: Plan, out_dir: str, role: str) -> None:
    rules = plan.policy.benchmark
    timeout = plan.policy.limits.run_timeout_s
    rng = secrets.SystemRandom()
    for case in plan.bench_cases:
        bench = BenchResult(case, plan.bench_seeds(case))
        retimed: str | None = None
        while True:  # at most twice: a window the GPU was not steady in may be timed again
            worker.prepare(Prepare(case.payload, rules.warmup + rng.randrange(EXTRA_WARMUP + 1),
                                   derive_seed(plan.seed, "warmup", case.id)), timeout_s=timeout)
            frames = _TimedFrames(len(bench.seeds))
            t0 = time.monotonic()
            batch = worker.timed(bench.seeds, timeout_s=timeout, on_progress=frames)
            bench.host_elapsed_s = time.monotonic() - t0
            flag = batch.gpu_state.get("flag")
            if not flag or retimed is not None or rules.unsteady_gpu != "retime":
                break
            retimed = str(flag)
        reply, bench.gpu_state, bench.retimed = batch.reply, batch.gpu_state, retimed
        times, re_out = reply.times_s, reply.re_out
        if times is None or len(times) != len(bench.seeds) or not all(
            isinstance(t, (int, float)) and t >= 0 for t in times
        ) or not frames.complete() or re_out is None or len(re_out) != len(times):
            raise KernelFault(ReasonCode.WORKER_PROTOCOL, "timed reply is malformed")
        bench.times_s = [float(t) for t in times]
        bench.clock = _clock_info(reply.clock)
        bench.calls = frames.calls
        for call, digest in zip(bench.calls, re_out, strict=True):
            call.re_out = str(digest)
        _kernel_names(bench, reply.clock)
        if role == "candidate" and rules.sampled_checks:
            # chosen only after the timed calls returned, so the candidate cannot know them
            k = min(rules.sampled_checks, len(bench.seeds))
            idx = sorted(rng.sample(range(len(bench.seeds)), k))
            names = [f"{case.id}_b{i}.safetensors" for i in idx]
            dumped = worker.dump(idx, [f"{out_dir}/{n}" for n in names], timeout_s=timeout)
            bench.sampled = {i: Path(n) for i, n in zip(idx, names, strict=True)}
            if dumped.bound is not None and len(dumped.bound) == len(idx):
                bench.dumped = dict(zip(idx, dumped.bound, strict=True))
        run.benches.append(bench)
