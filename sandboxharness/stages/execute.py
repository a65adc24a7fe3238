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
from .cases import Case, derive_seed
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
    reply: dict[str, Any] | None = None
    error: str | None = None
    bound: dict[str, str] = field(default_factory=dict)
    """Digests the worker sent right after the call: ``out`` and ``in`` (post-call inputs)."""
    sampled_index: int | None = None
    """Set for the re-check of a timed call: its index in the workload's timed batch."""
    launches: int | None = None
    """Triton kernels the call launched (worker-counted; None where not counted)."""


@dataclass
class TimedCall:
    """What the host learned about one timed call while it happened."""

    pre_in: str = ""
    """Digest of the inputs as made, announced before the call."""
    bound: dict[str, str] = field(default_factory=dict)
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
    dumped: dict[int, dict[str, str]] = field(default_factory=dict)


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
    sample: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Candidate only: case id -> the extra fields of a ``sample`` request for its first
    trial (stochastic outputs; see ``stages.repeats``)."""

    def trial_seed(self, case: Case, trial: int) -> int:
        return derive_seed(self.seed, "trial", case.id, trial)

    def bench_seeds(self, case: Case) -> list[int]:
        n = self.policy.benchmark.iterations
        return [derive_seed(self.seed, "bench", case.id, i) for i in range(n)]


def run_role(sandbox: Sandbox, job: JobSpec, hello: dict[str, Any], plan: Plan,
             time_it: bool = True) -> RoleRun:
    """Run everything one role needs in ONE sandboxed process, stopping at the first fault."""
    lim = plan.policy.limits
    run = RoleRun(role=job.role)
    t_start = time.monotonic()
    proc = sandbox.start(job, deadline_s=lim.compile_timeout_s + lim.run_timeout_s)
    session = WorkerSession(proc, lim.compile_timeout_s + lim.run_timeout_s)
    paths = proc.paths
    phase = "compile"
    try:
        reply = session.request({**hello, "op": "hello", "src": paths.src, "data": paths.data,
                                 "out": paths.out, "device": plan.device}, lim.compile_timeout_s,
                                fail_code=ReasonCode.COMPILE_ERROR)
        run.import_s = float(reply.get("import_s", 0.0))
        run.wall_s["compile"] = time.monotonic() - t_start
        phase, t0 = "correctness", time.monotonic()
        _calls(session, run, plan, paths.out)
        run.wall_s["correctness"] = time.monotonic() - t0
        if time_it:
            phase, t0 = "benchmark", time.monotonic()
            _benches(session, run, plan, paths.out, job.role)
            run.wall_s["benchmark"] = time.monotonic() - t0
    except KernelFault as fault:
        run.fault, run.fault_phase = fault, phase
    finally:
        run.exit = session.close()
    return run


def _digests(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        return {}
    return {k: raw[k] for k in ("out", "in") if isinstance(raw.get(k), str)}


def _count(raw: Any) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else None


def _call(session: WorkerSession, run: RoleRun, result: CallResult, *, out_dir: str,
          timeout: float, sample: dict[str, Any] | None = None) -> None:
    tag = f"b{result.sampled_index}" if result.sampled_index is not None else f"t{result.trial}"
    name = f"{result.case.id}_{tag}.safetensors"
    first: dict[str, str] = {}

    def bound_frame(frame: dict[str, Any], _at: float) -> None:
        first.update(_digests(frame))

    msg = {"op": "sample" if sample else "call", "case": result.case.payload,
           "seed": result.seed, "save": f"{out_dir}/{name}", **(sample or {})}
    try:
        result.reply = session.request(msg, timeout, on_progress=bound_frame,
                                       max_progress=1 if sample else 0)
        result.file = Path(name)
        result.bound = _digests(result.reply.get("bound"))
        if sample:  # the first call's results as bound before the repeated calls ran
            rep = (result.reply.get("bound") or {}).get("rep")
            result.bound = {**first, **({"rep": rep} if isinstance(rep, str) else {})}
        result.launches = _count(result.reply.get("launches"))
    except KernelFault as fault:
        if fault.code != ReasonCode.RUNTIME_ERROR:
            raise
        result.error = fault.message
    run.calls.append(result)


def _calls(session: WorkerSession, run: RoleRun, plan: Plan, out_dir: str) -> None:
    timeout = plan.policy.limits.run_timeout_s
    order = [(case, trial) for case in plan.cases for trial in range(plan.trials)]
    secrets.SystemRandom().shuffle(order)  # no fixed call order to count along
    for case, trial in order:
        _call(session, run, CallResult(case, trial, plan.trial_seed(case, trial)),
              out_dir=out_dir, timeout=timeout,
              sample=plan.sample.get(case.id) if trial == 0 else None)
    # the reference also computes the outputs of the candidate's sampled timed calls
    for case in plan.bench_cases:
        seeds = plan.bench_seeds(case)
        for idx in plan.sampled.get(case.id, []):
            _call(session, run, CallResult(case, -1, seeds[idx], sampled_index=idx),
                  out_dir=out_dir, timeout=timeout)
    if run.calls:
        reply = session.request({"op": "recheck"}, timeout)
        now = reply.get("digests")
        if isinstance(now, dict):
            run.rechecked = {Path(str(k)).name: v for k, v in now.items() if isinstance(v, str)}


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
        self._next = (0, "ready")

    def __call__(self, frame: dict[str, Any], at: float) -> None:
        i, stage = frame.get("i"), frame.get("stage")
        if (i, stage) != self._next:
            raise KernelFault(ReasonCode.WORKER_PROTOCOL,
                              f"timed frame {stage!r} #{i} out of order (expected {self._next})")
        assert isinstance(i, int)  # noqa: S101  (checked just above)
        call = self.calls[i]
        if stage == "ready":
            call.pre_in = str(frame.get("in", ""))
            self._ready_at, self._next = at, (i, "done")
        elif stage == "done":
            call.host_span_s = at - (self._ready_at or at)
            call.launches = _count(frame.get("launches"))
            self._next = (i, "bound")
        else:
            call.bound = _digests(frame)
            described = frame.get("described")
            call.described = described if isinstance(described, list) else []
            self._next = (i + 1, "ready")

    def complete(self) -> bool:
        return self._next == (len(self.calls), "ready")


def _benches(session: WorkerSession, run: RoleRun, plan: Plan, out_dir: str, role: str) -> None:
    rules = plan.policy.benchmark
    timeout = plan.policy.limits.run_timeout_s
    rng = secrets.SystemRandom()
    for case in plan.bench_cases:
        bench = BenchResult(case, plan.bench_seeds(case))
        session.request({"op": "prepare", "case": case.payload,
                         "warmup": rules.warmup + rng.randrange(EXTRA_WARMUP + 1),
                         "warmup_seed": derive_seed(plan.seed, "warmup", case.id)}, timeout)
        frames = _TimedFrames(len(bench.seeds))
        t0 = time.monotonic()
        reply = session.request({"op": "timed", "seeds": bench.seeds}, timeout,
                                on_progress=frames, max_progress=3 * len(bench.seeds))
        bench.host_elapsed_s = time.monotonic() - t0
        times, re_out = reply.get("times_s"), reply.get("re_out")
        if not isinstance(times, list) or len(times) != len(bench.seeds) or not all(
            isinstance(t, (int, float)) and t >= 0 for t in times
        ) or not frames.complete() or not isinstance(re_out, list) or len(re_out) != len(times):
            raise KernelFault(ReasonCode.WORKER_PROTOCOL, "timed reply is malformed")
        bench.times_s = [float(t) for t in times]
        bench.clock = _clock_info(reply.get("clock"))
        bench.calls = frames.calls
        for call, digest in zip(bench.calls, re_out, strict=True):
            call.re_out = str(digest)
        names = (reply.get("clock") or {}).get("kernel_names") if isinstance(
            reply.get("clock"), dict) else None
        if isinstance(names, list) and len(names) == len(bench.calls):
            for call, got in zip(bench.calls, names, strict=True):
                if isinstance(got, list):
                    call.kernels = [str(n)[:200] for n in got[:16]]
        if role == "candidate" and rules.sampled_checks:
            # chosen only after the timed calls returned, so the candidate cannot know them
            k = min(rules.sampled_checks, len(bench.seeds))
            idx = sorted(rng.sample(range(len(bench.seeds)), k))
            names = [f"{case.id}_b{i}.safetensors" for i in idx]
            dumped = session.request({"op": "dump", "indices": idx,
                                      "paths": [f"{out_dir}/{n}" for n in names]}, timeout)
            bench.sampled = {i: Path(n) for i, n in zip(idx, names, strict=True)}
            raw = dumped.get("bound")
            if isinstance(raw, list) and len(raw) == len(idx):
                bench.dumped = {i: _digests(b) for i, b in zip(idx, raw, strict=True)}
        run.benches.append(bench)
