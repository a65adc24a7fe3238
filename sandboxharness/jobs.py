"""Job directories and the two sandboxed runs: the candidate first, then the reference.

The reference runs in a process of its own after the candidate's process tree is gone, and
its outputs live in a directory the candidate's job never sees.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from .errors import InputError
from .models import Definition, Policy, Solution, WorkloadTrace
from .models.workload import SafetensorsInput
from .sandbox.interface import JobSpec, Sandbox
from .stages.cases import Case
from .stages.execute import Plan, RoleRun, run_role


def stage_blobs(workloads: list[WorkloadTrace], blob_root: Path | None, data_dir: Path) -> Path:
    """Check every safetensors input exists (a clear error, not a crash), then expose only those
    blobs to the sandbox: hard links (copies across filesystems) in a per-evaluation directory,
    never the blob root itself, which may hold anything."""
    root = (blob_root or Path.cwd()).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    for wl in workloads:
        for name, spec in wl.workload.inputs.items():
            if not isinstance(spec, SafetensorsInput):
                continue
            blob = (root / spec.path).resolve()
            if not blob.is_relative_to(root):
                raise InputError(f"blob path of input {name!r} leaves the blob root",
                                 where=f"workload {wl.workload.uuid}")
            if not blob.is_file():
                raise InputError(f"safetensors blob for input {name!r} not found: {blob}",
                                 where=f"workload {wl.workload.uuid}")
            target = data_dir / spec.path
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(blob, target)
            except OSError:
                shutil.copyfile(blob, target)
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
    bench_cases = [c for c in cases if not c.heldout]
    plan = Plan(cases=cases, bench_cases=bench_cases, trials=policy.correctness.trials,
                seed=seed, device=device, policy=policy)
    cand_job = _job(root, "candidate", data_dir, policy, device)
    for src in solution.sources:
        path = cand_job.src_dir / src.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src.content, encoding="utf-8")
    cand = run_role(sandbox, cand_job, candidate_hello(solution), plan)
    if cand.fault is not None and cand.fault_phase in ("compile", "correctness"):
        return cand, None, plan
    ref_job = _job(root, "reference", data_dir, policy, device)
    (ref_job.src_dir / "reference.py").write_text(definition.reference, encoding="utf-8")
    sampled = {b.case.id: sorted(b.sampled) for b in cand.benches}
    ref_plan = replace(plan, sampled=sampled)
    ref = run_role(sandbox, ref_job, {"role": "reference", "entry_file": "reference.py",
                                      "entry_func": "run", "dps": False,
                                      "preload_triton": False}, ref_plan)
    if ref.fault is not None:
        raise InputError(f"the definition's reference failed during {ref.fault_phase}: "
                         f"{ref.fault.message}", where=definition.name)
    return cand, ref, plan
