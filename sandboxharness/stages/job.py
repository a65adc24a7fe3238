"""Job directories and the two sandboxed runs: the candidate first, then the reference.

The candidate's worker takes every phase in one process (compile, correctness calls, timed
calls); the reference runs in a process of its own after the candidate's process tree is
gone, and its outputs live in a directory the candidate's job never sees.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from .._internal.files import write_sources
from ..errors import InfrastructureError, InputError
from ..models import Policy, Solution, WorkloadTrace
from ..models.workload import SafetensorsInput
from ..sandbox.interface import JobSpec
from . import limits, repeats
from .cases import CasePlan, build_cases
from .client import hello_for_candidate, hello_for_reference
from .context import EvaluationContext, SoFar
from .execute import Plan, RoleRun, run_role


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


def _job(ctx: EvaluationContext, role: str, data_dir: Path) -> JobSpec:
    if ctx.on_gpu:  # GPU: the toolchain (nvcc, ninja) for builds inside the sandbox
        from .compile_cuda import gpu_env

        env = gpu_env()
    else:
        env = {"TRITON_INTERPRET": "1"}
    env.update(ctx.lane.env())
    return job_spec(ctx.root / role, data_dir=data_dir, policy=ctx.policy, env=env,
                    gpu=ctx.on_gpu)


def execute(ctx: EvaluationContext) -> Execution:
    """Stage the blobs, build the cases, run the candidate, then (if it got that far) the
    reference. A failure of the reference is the definition's, never the candidate's."""
    data_dir = stage_blobs(ctx.workloads, ctx.blob_root, ctx.root / "data")
    cases = build_cases(ctx.definition, list(ctx.workloads), ctx.policy, seed=ctx.seed)
    limits.check_plan(cases, ctx.policy, getattr(ctx.sandbox, "out_quota_mb", None))
    plan = Plan(cases=cases, bench_cases=[c for c in cases if not c.heldout],
                trials=ctx.policy.correctness.trials, seed=ctx.seed, device=ctx.device,
                policy=ctx.policy, lane=ctx.lane)
    cand_job = _job(ctx, "candidate", data_dir)
    write_sources(cand_job.src_dir, solution_files(ctx.solution))
    sample = {c.id: req for c in cases
              if (req := repeats.sample_request(ctx.definition, c, ctx.policy)) is not None}
    cand = run_role(ctx.sandbox, cand_job, hello_for_candidate(ctx.solution),
                    replace(plan, sample=sample))
    done = Execution(cand=cand, ref=None, plan=plan, cases=cases, data_dir=data_dir,
                     cand_dir=cand_job.out_dir, ref_dir=ctx.root / "reference" / "out")
    if cand.fault is not None and cand.fault_phase in ("compile", "correctness"):
        return done
    ref_job = _job(ctx, "reference", data_dir)
    write_sources(ref_job.src_dir, [("reference.py", ctx.definition.reference.encode("utf-8"))])
    sampled = {b.case.id: sorted(b.sampled) for b in cand.benches}
    ref = run_role(ctx.sandbox, ref_job, hello_for_reference(), replace(plan, sampled=sampled))
    failed = next((c for c in ref.calls if c.error is not None and not c.case.heldout), None)
    if failed is not None:  # the earliest failure: a correctness call of the reference raised
        raise InputError(f"the definition's reference failed during correctness on workload "
                         f"{failed.case.workload}: {failed.error}", where=ctx.definition.name)
    if ref.fault is not None:
        raise limits.reference_fault(ref.fault, ref.fault_phase, ctx.definition.name)
    return replace(done, ref=ref)


def execution(ctx: EvaluationContext, so_far: SoFar) -> Execution:
    """The evaluation's sandboxed runs, made by the first stage that needs them."""
    result: Execution = so_far.shared("execution", lambda: execute(ctx))
    return result
