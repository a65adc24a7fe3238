"""Job directories and the two sandboxed runs, the candidate's and the reference's.

The candidate's worker takes every phase in one process (compile, correctness calls, timed
calls); the reference runs in a process of its own, side by side with it (each call made on
both at once), and its outputs live in a directory the candidate's job never sees. Each call
is judged as it comes, while the next one is made.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._internal.files import write_sources
from ..errors import InfrastructureError, InputError
from ..models import Policy, Solution, WorkloadTrace
from ..models.workload import SafetensorsInput
from ..sandbox.interface import JobSpec
from ..worker.protocol import CallReply, Repeat
from . import limits, repeats
from .call_judge import judge_call
from .cases import Case, CasePlan, build_cases
from .client import hello_for_candidate, hello_for_reference
from .context import EvaluationContext, SoFar
from .execute import BenchResult, CallResult, Plan, Role, RoleRun, call_order
from .reftimes import ReferenceTimings


@dataclass(frozen=True)
class Execution:
    """The sandboxed runs every dynamic stage reads."""

    cand: RoleRun
    ref: RoleRun | None  # None: the candidate failed before the reference was needed
    plan: Plan
    cases: CasePlan
    data_dir: Path
    cand_dir: Path  # the candidate's out directory (its saved results)
    ref_dir: Path


def _allowed_bases(root: Path) -> list[Path]:
    """Where a blob may really live: the blob root, and for a Hugging Face cache snapshot
    (``<repo>/snapshots/<rev>/...``, files that are relative links into ``<repo>/blobs``) that
    repo's ``blobs`` folder. Nothing else: a link leaving the dataset tree is refused."""
    bases = [root.resolve()]
    for base in (root, root.resolve()):
        for anc in (base, *base.parents):
            if anc.parent.name == "snapshots" and (anc.parent.parent / "blobs").is_dir():
                bases.append((anc.parent.parent / "blobs").resolve())
                break
    return bases


def _expose(blob: Path, target: Path) -> None:
    """Give the sandbox's unprivileged uid a readable copy without touching the user's file:
    a hard link only when the blob is already world-readable (``safetensors.save_file`` writes
    0600), else a 0644 copy in the per-evaluation directory."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if blob.stat().st_mode & stat.S_IROTH:
        try:
            os.link(blob, target)
            return
        except OSError:
            pass  # another filesystem, or protected hard links: copy instead
    tmp = target.with_name(target.name + ".part")
    shutil.copyfile(blob, tmp)
    tmp.chmod(0o644)
    tmp.replace(target)


def stage_blobs(workloads: Iterable[WorkloadTrace], blob_root: Path | None, data_dir: Path) -> Path:
    """Check every safetensors input exists (a clear error, not a crash), then expose only those
    blobs to the sandbox: readable links or copies in a per-evaluation directory, never the blob
    root itself, which may hold anything."""
    root = blob_root or Path.cwd()
    bases = _allowed_bases(root)
    data_dir.mkdir(parents=True, exist_ok=True)
    for wl in workloads:
        for name, spec in wl.workload.inputs.items():
            if not isinstance(spec, SafetensorsInput):
                continue
            blob = (root / spec.path).resolve()
            if not any(blob.is_relative_to(b) for b in bases):
                raise InputError(f"blob path of input {name!r} leaves the blob root",
                                 where=f"workload {wl.workload.uuid}")
            if not blob.is_file():
                raise InputError(f"safetensors blob for input {name!r} not found: {blob}",
                                 where=f"workload {wl.workload.uuid}")
            target = data_dir / spec.path
            if not target.exists():
                _expose(blob, target)
            if not target.stat().st_mode & stat.S_IROTH:  # a harness fault, never the kernel's
                raise InfrastructureError(f"staged blob {target} is not readable by the sandbox")
    for d in (data_dir, *[p for p in data_dir.rglob("*") if p.is_dir()]):
        d.chmod(0o755)  # readable by the sandbox's unprivileged uid, writable by nobody there
    return data_dir


def job_dirs(base: Path) -> dict[str, Path]:
    """A job's private ``src``, ``out`` and ``tmp`` directories, created fresh (0700)."""
    dirs = {k: base / k for k in ("src", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(parents=True, mode=0o700)
    return dirs


def solution_files(solution: Solution) -> list[tuple[str, bytes]]:
    return [(s.path, s.content.encode("utf-8")) for s in solution.sources]


def job_spec(base: Path, *, data_dir: Path, policy: Policy, env: dict[str, str],
             gpu: bool) -> JobSpec:
    """The one way a sandboxed job gets its directories."""
    dirs = job_dirs(base)
    return JobSpec(role=base.name, src_dir=dirs["src"], data_dir=data_dir, out_dir=dirs["out"],
                   tmp_dir=dirs["tmp"], limits=policy.limits, env=env, gpu=gpu)


def _job(ctx: EvaluationContext, role: str, data_dir: Path, cases: int) -> JobSpec:
    if ctx.on_gpu:  # GPU: the toolchain (nvcc, ninja) for builds inside the sandbox
        from .compile_cuda import gpu_env

        env = gpu_env()
    else:
        env = {"TRITON_INTERPRET": "1"}
    env.update(ctx.lane.env())
    spec = job_spec(ctx.root / role, data_dir=data_dir, policy=ctx.policy, env=env,
                    gpu=ctx.on_gpu)
    return replace(spec, limits=limits.session_limits(ctx.policy.limits, cases))


def execute(ctx: EvaluationContext) -> Execution:
    """Stage the blobs, build the cases, then run the candidate and the reference side by side:
    each correctness call is made on both, judged at once and its files removed, so results
    never pile up (any workload set fits the out-dir quota one call at a time). The reference
    loads while the candidate compiles (a candidate that does not compile costs a reference
    start, never a reference call); a failure of the reference is the definition's, never the
    candidate's."""
    data_dir = stage_blobs(ctx.workloads, ctx.blob_root, ctx.root / "data")
    cases = build_cases(ctx.definition, list(ctx.workloads), ctx.policy, seed=ctx.seed)
    limits.check_plan(cases, ctx.policy, getattr(ctx.sandbox, "out_quota_mb", None))
    plan = Plan(cases=cases, bench_cases=[c for c in cases if not c.heldout],
                trials=ctx.policy.correctness.trials, seed=ctx.seed, device=ctx.device,
                policy=ctx.policy, lane=ctx.lane)
    cand_job = _job(ctx, "candidate", data_dir, len(cases))
    write_sources(cand_job.src_dir, solution_files(ctx.solution))
    sample = {c.id: req for c in cases
              if (req := repeats.sample_request(ctx.definition, c, ctx.policy)) is not None}
    cand = Role(ctx.sandbox, cand_job, hello_for_candidate(ctx.solution),
                replace(plan, sample=sample))
    done = Execution(cand=cand.run, ref=None, plan=plan, cases=cases, data_dir=data_dir,
                     cand_dir=cand_job.out_dir, ref_dir=ctx.root / "reference" / "out")
    ref: Role | None = None
    try:
        ref_job = _job(ctx, "reference", data_dir, len(cases))
        write_sources(ref_job.src_dir, [("reference.py",
                                         ctx.definition.reference.encode("utf-8"))])
        ref = Role(ctx.sandbox, ref_job, hello_for_reference(), plan)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="shx-ref") as pool:
            ref_open = pool.submit(ref.open)  # its start-up overlaps the candidate's compile
            compiled = cand.open()
            ref_opened = ref_open.result()
        if not compiled:
            return done
        judge = _Judge(ctx, done)
        if ref_opened:
            t0 = time.monotonic()
            _correctness_calls(cand, ref, judge, plan, sample, overlap=limits.overlap_fits(
                cases, getattr(ctx.sandbox, "out_quota_mb", None)))
            if cand.ok and cand.recheck():
                cand.run.wall_s["correctness"] = time.monotonic() - t0
            if ref.ok:
                ref.recheck()  # frees what its worker held; the reference is not judged on it
        if not cand.ok and cand.run.fault_phase in ("compile", "correctness"):
            return done  # the candidate failed first: the reference's results are not needed
        _reference_held(ctx, ref.run)
        if cand.ok:
            cand.benches(on_sampled=lambda bench: judge.sampled(ref, bench))
        cand.close()  # gone before its reference is timed: nothing of it runs beside that
        if ref.ok:
            _time_reference(ctx, ref, cases)
        _reference_held(ctx, ref.run)
        return replace(done, ref=ref.run)
    finally:
        cand.close()
        if ref is not None:
            ref.close()


def _time_reference(ctx: EvaluationContext, ref: Role, cases: list[Case]) -> None:
    """The reference's timed calls: measured here, or kept from the run's first candidate of
    this definition (same definition, policy, seed, cases and GPU lane: the same work)."""
    shared: ReferenceTimings | None = ctx.reference_timings
    if shared is None:
        ref.benches()
        return
    key = (ctx.definition.content_hash(), ctx.policy.content_hash(), ctx.seed, ctx.device,
           ctx.lane.index, tuple(c.id for c in cases))
    got = shared.get(key, lambda: list(ref.run.benches) if ref.benches() else None,
                     ctx.solution.name)
    if got is not None and got.by != ctx.solution.name:
        ref.run.benches = list(got.benches)
        ref.run.timed_by = got.by


def _correctness_calls(cand: Role, ref: Role, judge: _Judge, plan: Plan,
                       sample: dict[str, Repeat], *, overlap: bool) -> None:
    """Each call made on both workers at once, then judged; with ``overlap`` the judging of one
    call runs while the next is made (its files and the next call's exist together), its
    candidate file moved out of the worker's view first (``_Judge.hold``)."""
    spent = {"calls": 0.0, "judging_wait": 0.0}  # where the stage's wall time went

    def wait(judging: Future[None] | None) -> None:
        t0 = time.monotonic()
        if judging is not None:
            judging.result()
        spent["judging_wait"] += time.monotonic() - t0

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="shx-call") as pool:
        judging: Future[None] | None = None
        for case, trial in call_order(plan):
            seed = plan.trial_seed(case, trial)
            r, c = CallResult(case, trial, seed), CallResult(case, trial, seed)
            t0 = time.monotonic()
            ref_made = pool.submit(ref.call, r)
            cand_ok = cand.call(c, repeat=sample.get(case.id) if trial == 0 else None)
            ref_ok = ref_made.result()
            spent["calls"] += time.monotonic() - t0
            wait(judging)
            judging = None
            if not (ref_ok and cand_ok):
                break
            held = judge.hold(c) if overlap else None
            judging = pool.submit(judge.call, c, r, held)
            if held is None:  # in the worker's view until judged: before its next call
                wait(judging)
                judging = None
        wait(judging)
    cand.run.wall_s.update({f"correctness_{k}": v for k, v in spent.items()})


def _reference_held(ctx: EvaluationContext, ref: RoleRun) -> None:
    """Raise if the reference failed: bad input when it raised on a workload, a harness error
    when it hit a harness limit."""
    failed = next((c for c in ref.calls if c.error is not None and not c.case.heldout), None)
    if failed is not None:  # the earliest failure: a correctness call of the reference raised
        raise InputError(f"the definition's reference failed during correctness on workload "
                         f"{failed.case.workload}: {failed.error}", where=ctx.definition.name)
    if ref.fault is not None:
        raise limits.reference_fault(ref.fault, ref.fault_phase, ctx.definition.name)


class _Judge:
    """Judges calls as they come and removes their result files."""

    def __init__(self, ctx: EvaluationContext, run: Execution) -> None:
        self.ctx, self.run = ctx, run
        self.held = run.cand_dir.parent / "held"
        """Beside the candidate's out dir, in no sandbox's view: its results being judged."""

    def hold(self, cand: CallResult) -> Path | None:
        """Move the candidate's result file out of its worker's reach before its next call, so
        that call's code finds nothing of it to swap or rewrite while it is judged. Where the
        file now is (None: it stays; judge it before the next call)."""
        if cand.file is None:
            return None
        try:
            self.held.mkdir(mode=0o700, exist_ok=True)
            os.rename(self.run.cand_dir / cand.file, self.held / cand.file)
        except OSError:
            return None
        return self.held

    def _judge(self, cand: CallResult, ref: CallResult, cand_dir: Path | None = None) -> Any:
        try:
            return judge_call(self.ctx.definition, self.ctx.policy, cand, ref,
                              cand_dir=cand_dir or self.run.cand_dir, ref_dir=self.run.ref_dir,
                              data_dir=str(self.run.data_dir))
        except Exception as exc:  # noqa: BLE001  kept for the stage, which raises it
            return exc

    def _drop(self, *paths: Path | None) -> None:
        for p in paths:
            if p is not None:
                p.unlink(missing_ok=True)

    def call(self, cand: CallResult, ref: CallResult, cand_dir: Path | None = None) -> None:
        """Judge one call; ``cand_dir``: where ``hold`` moved its file (default: the out dir)."""
        where = cand_dir or self.run.cand_dir
        if ref.error is not None:
            return  # the stage decides: a held-out size the definition refuses, or bad input
        cand.judged = self._judge(cand, ref, where)
        self._drop(where / cand.file if cand.file else None,
                   self.run.ref_dir / ref.file if ref.file else None)

    def sampled(self, ref: Role | None, bench: BenchResult) -> None:
        """The reference computes the candidate's sampled timed calls (chosen after the timed
        batch returned); each is judged at once against the candidate's dump."""
        if ref is None or not ref.ok:
            return
        t0 = time.monotonic()
        try:
            self._sampled(ref, bench)
        finally:
            spent = self.run.cand.wall_s
            spent["sampled_checks"] = spent.get("sampled_checks", 0.0) + time.monotonic() - t0

    def _sampled(self, ref: Role, bench: BenchResult) -> None:
        seeds = self.run.plan.bench_seeds(bench.case)
        n_out = len(bench.case.payload["outputs"])
        for idx, fname in sorted(bench.sampled.items()):
            r = CallResult(bench.case, -1, seeds[idx], sampled_index=idx)
            if not ref.call(r):
                return
            if r.error is None:
                c = CallResult(bench.case, -1, bench.seeds[idx], file=fname,
                               reply=CallReply(n_outputs=n_out), bound=bench.calls[idx].bound,
                               sampled_index=idx)
                r.judged = self._judge(c, r)
                self._drop(self.run.cand_dir / fname, self.run.ref_dir / r.file if r.file else None)


def host_times(run: Execution) -> dict[str, float]:
    """Where the evaluation's wall time went on the host, in s: the workers' start and
    compile, the calls (both workers at once), the waits on judging, the timed calls of each
    role and the sampled re-checks (benchmarks print it; nothing is decided on it)."""
    out = {f"candidate_{k}": v for k, v in run.cand.wall_s.items()}
    if run.ref is not None:
        out.update({f"reference_{k}": v for k, v in run.ref.wall_s.items()})
    return {k: round(v, 3) for k, v in sorted(out.items())}


def execution(ctx: EvaluationContext, so_far: SoFar) -> Execution:
    """The evaluation's sandboxed runs, made by the first stage that needs them."""
    result: Execution = so_far.shared("execution", lambda: execute(ctx))
    return result
