"""Drive one sandboxed worker (candidate or reference) through a plan; record raw facts only."""

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


@dataclass
class CallResult:
    case: Case
    trial: int
    seed: int
    file: Path | None = None
    reply: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class BenchResult:
    case: Case
    seeds: list[int]
    times_s: list[float] = field(default_factory=list)
    host_elapsed_s: float = 0.0
    sampled: dict[int, Path] = field(default_factory=dict)
    clock: dict[str, Any] = field(default_factory=dict)
    """How the worker says it timed (GPU): informational, never trusted for a decision."""


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


def _call(session: WorkerSession, run: RoleRun, case: Case, trial: int, seed: int,
          out_dir: str, timeout: float) -> None:
    name = f"{case.id}_t{trial}.safetensors"
    result = CallResult(case, trial, seed)
    try:
        result.reply = session.request({"op": "call", "case": case.payload, "seed": seed,
                                        "save": f"{out_dir}/{name}"}, timeout)
        result.file = Path(name)
    except KernelFault as fault:
        if fault.code != ReasonCode.RUNTIME_ERROR:
            raise
        result.error = fault.message
    run.calls.append(result)


def _calls(session: WorkerSession, run: RoleRun, plan: Plan, out_dir: str) -> None:
    timeout = plan.policy.limits.run_timeout_s
    for case in plan.cases:
        for trial in range(plan.trials):
            _call(session, run, case, trial, plan.trial_seed(case, trial), out_dir, timeout)
    # the reference also computes the outputs of the candidate's sampled timed calls
    for case in plan.bench_cases:
        seeds = plan.bench_seeds(case)
        for idx in plan.sampled.get(case.id, []):
            _call(session, run, case, 1000 + idx, seeds[idx], out_dir, timeout)


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


def _benches(session: WorkerSession, run: RoleRun, plan: Plan, out_dir: str, role: str) -> None:
    rules = plan.policy.benchmark
    timeout = plan.policy.limits.run_timeout_s
    for case in plan.bench_cases:
        bench = BenchResult(case, plan.bench_seeds(case))
        session.request({"op": "prepare", "case": case.payload, "seeds": bench.seeds,
                         "warmup": rules.warmup,
                         "warmup_seed": derive_seed(plan.seed, "warmup", case.id)}, timeout)
        t0 = time.monotonic()
        reply = session.request({"op": "timed"}, timeout)
        bench.host_elapsed_s = time.monotonic() - t0
        times = reply.get("times_s")
        if not isinstance(times, list) or len(times) != len(bench.seeds) or not all(
            isinstance(t, (int, float)) and t >= 0 for t in times
        ):
            raise KernelFault(ReasonCode.WORKER_PROTOCOL, "timed reply is malformed")
        bench.times_s = [float(t) for t in times]
        bench.clock = _clock_info(reply.get("clock"))
        if role == "candidate" and rules.sampled_checks:
            # chosen only after the timed calls returned, so the candidate cannot know them
            rng = secrets.SystemRandom()
            k = min(rules.sampled_checks, len(bench.seeds))
            idx = sorted(rng.sample(range(len(bench.seeds)), k))
            names = [f"{case.id}_b{i}.safetensors" for i in idx]
            session.request({"op": "dump", "indices": idx,
                             "paths": [f"{out_dir}/{n}" for n in names]}, timeout)
            bench.sampled = {i: Path(n) for i, n in zip(idx, names, strict=True)}
        run.benches.append(bench)
