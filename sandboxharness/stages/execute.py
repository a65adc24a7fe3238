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
from collections.abc import Callable
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
from .limits import session_deadline_s
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
    judged: Any = None
    """Set when the call was judged as it came (its files are then gone): ``judge_call``'s
    (code, message, stats), or the exception judging raised, for the stage to raise."""


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
    timed_by: str | None = None
    """Reference only: the candidate whose evaluation measured these benches, when they were
    kept from another of the run (``stages.reftimes``); None: measured here."""


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


class Role:
    """One role's sandboxed worker, driven step by step; a fault ends it and is kept with its
    phase (``run_role`` drives a role whole; ``job.execute`` interleaves two)."""

    def __init__(self, sandbox: Sandbox, job: JobSpec, hello: Hello, plan: Plan) -> None:
        lim = plan.policy.limits
        self.plan, self.hello = plan, hello
        self.run = RoleRun(role=job.role)
        self._t_start = time.monotonic()
        deadline = session_deadline_s(lim, len(plan.cases))
        proc = sandbox.start(job, deadline_s=deadline)
        self.worker = WorkerClient(WorkerSession(proc, deadline), plan.lane)
        self.out_dir = proc.paths.out
        self.timeout = lim.run_timeout_s

    @property
    def ok(self) -> bool:
        return self.run.fault is None

    def _fault(self, fault: KernelFault, phase: str) -> bool:
        self.run.fault, self.run.fault_phase = fault, phase
        return False

    def open(self) -> bool:
        """Hello: load or build the role's code (the compile phase)."""
        try:
            self.run.import_s = self.worker.hello(
                self.hello, device=self.plan.device,
                timeout_s=self.plan.policy.limits.compile_timeout_s).import_s
        except KernelFault as fault:
            return self._fault(fault, "compile")
        self.run.wall_s["compile"] = time.monotonic() - self._t_start
        return True

    def call(self, result: CallResult, repeat: Repeat | None = None,
             phase: str = "correctness") -> bool:
        try:
            _call(self.worker, self.run, result, self.out_dir, timeout=self.timeout,
                  repeat=repeat)
        except KernelFault as fault:
            return self._fault(fault, phase)
        return True

    def recheck(self) -> bool:
        if not self.run.calls:
            return True
        try:
            now = self.worker.recheck(timeout_s=self.timeout).digests
        except KernelFault as fault:
            return self._fault(fault, "correctness")
        self.run.rechecked = {Path(k).name: v for k, v in now.items()}
        return True

    def benches(self, on_sampled: OnSampled | None = None) -> bool:
        t0 = time.monotonic()
        try:
            _benches(self.worker, self.run, self.plan, self.out_dir, self.run.role,
                     on_sampled=on_sampled)
        except KernelFault as fault:
            return self._fault(fault, "benchmark")
        self.run.wall_s["benchmark"] = time.monotonic() - t0
        return True

    def close(self) -> None:
        self.run.exit = self.worker.close()


OnSampled = Callable[[BenchResult], None]
"""Called with each bench case right after its sampled timed calls were dumped."""


def run_role(sandbox: Sandbox, job: JobSpec, hello: Hello, plan: Plan,
             time_it: bool = True) -> RoleRun:
    """Run everything one role needs in ONE sandboxed process, stopping at the first fault."""
    role = Role(sandbox, job, hello, plan)
    try:
        if role.open():
            t0 = time.monotonic()
            if _calls(role) and role.recheck():
                role.run.wall_s["correctness"] = time.monotonic() - t0
                if time_it:
                    role.benches()
    finally:
        role.close()
    return role.run


def call_order(plan: Plan) -> list[tuple[Case, int]]:
    order = [(case, trial) for case in plan.cases for trial in range(plan.trials)]
    secrets.SystemRandom().shuffle(order)  # no fixed call order to count along
    return order


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


def _calls(role: Role) -> bool:
    plan = role.plan
    for case, trial in call_order(plan):
        if not role.call(CallResult(case, trial, plan.trial_seed(case, trial)),
                         repeat=plan.sample.get(case.id) if trial == 0 else None):
            return False
    # the reference also computes the outputs of the candidate's sampled timed calls
    for case in plan.bench_cases:
        seeds = plan.bench_seeds(case)
        for idx in plan.sampled.get(case.id, []):
            if not role.call(CallResult(case, -1, seeds[idx], sampled_index=idx)):
                return False
    return True


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


def _benches(worker: WorkerClient, run: RoleRun, plan: Plan, out_dir: str, role: str, *,
             on_sampled: OnSampled | None = None) -> None:
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
        if on_sampled is not None and bench.sampled:
            on_sampled(bench)
