"""Job directories and the two sandboxed runs: the candidate first, then the reference.

The reference runs in a process of its own after the candidate's process tree is gone, and
its outputs live in a directory the candidate's job never sees.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from .errors import InfrastructureError, InputError
from .models import Definition, Policy, Solution, WorkloadTrace
from .models.workload import SafetensorsInput
from .sandbox.interface import JobSpec, Sandbox
from .stages import limits, repeats
from .stages.cases import Case
from .stages.execute import Plan, RoleRun, run_role


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


def stage_blobs(workloads: list[WorkloadTrace], blob_root: Path | None, data_dir: Path) -> Path:
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


def _job(root: Path, role: str, data_dir: Path, policy: Policy, device: str) -> JobSpec:
    base = root / role
    dirs = {k: base / k for k in ("src", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(parents=True, mode=0o700)
    if device == "cpu":
        env = {"TRITON_INTERPRET": "1"}
    else:  # GPU: the toolchain (nvcc, ninja) for builds inside the sandbox
        from .stages.compile_cuda import gpu_env

        env = gpu_env()
    return JobSpec(role=role, src_dir=dirs["src"], data_dir=data_dir, out_dir=dirs["out"],
                   tmp_dir=dirs["tmp"], limits=policy.limits, env=env, gpu=device != "cpu")


def candidate_hello(solution: Solution) -> dict[str, Any]:
    """What the worker is told about the candidate (the sanitizer stage reuses it)."""
    spec = solution.spec
    return {
        "role": "candidate", "entry_file": spec.entry_file, "entry_func": spec.entry_function,
        "dps": spec.destination_passing_style, "preload_triton": spec.language.value == "triton",
        "language": spec.language.value, "binding": spec.binding.value if spec.binding else None,
        "build_key": solution.content_hash(),
    }


def run_both(sandbox: Sandbox, definition: Definition, solution: Solution, cases: list[Case],
             policy: Policy, seed: int, device: str, root: Path,
             data_dir: Path) -> tuple[RoleRun, RoleRun | None, Plan]:
    limits.check_plan(cases, policy, getattr(sandbox, "out_quota_mb", None))
    bench_cases = [c for c in cases if not c.heldout]
    plan = Plan(cases=cases, bench_cases=bench_cases, trials=policy.correctness.trials,
                seed=seed, device=device, policy=policy)
    cand_job = _job(root, "candidate", data_dir, policy, device)
    for src in solution.sources:
        path = cand_job.src_dir / src.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src.content, encoding="utf-8")
    sample = {c.id: req for c in cases
              if (req := repeats.sample_request(definition, c, policy)) is not None}
    cand = run_role(sandbox, cand_job, candidate_hello(solution), replace(plan, sample=sample))
    if cand.fault is not None and cand.fault_phase in ("compile", "correctness"):
        return cand, None, plan
    ref_job = _job(root, "reference", data_dir, policy, device)
    (ref_job.src_dir / "reference.py").write_text(definition.reference, encoding="utf-8")
    sampled = {b.case.id: sorted(b.sampled) for b in cand.benches}
    ref_plan = replace(plan, sampled=sampled)
    ref = run_role(sandbox, ref_job, {"role": "reference", "entry_file": "reference.py",
                                      "entry_func": "run", "dps": False,
                                      "preload_triton": False}, ref_plan)
    failed = next((c for c in ref.calls if c.error is not None and not c.case.heldout), None)
    if failed is not None:  # the earliest failure: a correctness call of the reference raised
        raise InputError(f"the definition's reference failed during correctness on workload "
                         f"{failed.case.workload}: {failed.error}", where=definition.name)
    if ref.fault is not None:
        raise limits.reference_fault(ref.fault, ref.fault_phase, definition.name)
    return cand, ref, plan
