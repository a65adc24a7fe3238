"""``sandboxharness doctor``: what this machine offers for isolation and GPU work.

Thin: the checks live in ``sandbox.capabilities`` (each one really tries the thing) and are
gathered by ``doctor_report``; this module renders them. Always exits 0: a missing layer is
information, not an error.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table


def _mark(ok: bool) -> str:
    return "[green]yes[/green]" if ok else "[red]no[/red]"


def _rows(rep: Any) -> list[tuple[str, bool | None, str]]:
    ns = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in rep.namespaces.items()) or "-"
    cg = rep.cgroups
    gpu = rep.gpu
    return [
        ("namespaces (in a new user ns)", bool(rep.namespaces) and all(rep.namespaces.values()),
         ns),
        ("hardened process sandbox", rep.hardened_sandbox.ok, rep.hardened_sandbox.detail),
        ("seccomp filter", rep.seccomp.ok, rep.seccomp.detail),
        ("libseccomp", rep.libseccomp is not None,
         rep.libseccomp or "absent: the process backend runs without a syscall filter"),
        ("cgroup v1 controllers", bool(cg["v1_controllers"]),
         ", ".join(cg["v1_controllers"]) or "-"),
        ("cgroup v2 controllers", bool(cg["v2_controllers"]),
         ", ".join(cg["v2_controllers"]) or "-"),
        ("job cgroups (memory, pids)", cg["job_cgroup"]["ok"],
         "; ".join([f"{k}: {v}" for k, v in cg["job_controllers"].items()] + cg["notes"])),
        ("docker engine", rep.docker_engine.ok, rep.docker_engine.detail),
        ("docker runtimes", None, ", ".join(rep.docker_runtimes) or "-"),
        ("docker backend (runc)", rep.docker_backend.ok, rep.docker_backend.detail),
        ("gVisor (runsc)", rep.runsc.ok, rep.runsc.detail),
        ("nvidia-smi", bool(gpu["nvidia_smi"]), "; ".join(gpu["gpus"]) or
         (gpu["nvidia_smi"] or "not found")),
        ("torch.cuda", gpu["torch_cuda"], f"torch {gpu['torch']}, CUDA {gpu['torch_cuda_version']}"
         f", device {gpu['device']}"),
        ("CUDA in the hardened sandbox", rep.cuda_in_sandbox.ok, rep.cuda_in_sandbox.detail),
        *[(tool, path is not None, path or "not found") for tool, path in rep.tools.items()],
    ]


def doctor(
    json_out: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """What this machine offers (namespaces, seccomp, cgroups, docker, gVisor, GPU, CUDA
    tools), checked by really trying, and which backend ``auto`` picks. Exit 0."""
    from .doctor_report import report

    rep = report()
    if json_out:
        print(json.dumps(rep.to_dict(), indent=2, sort_keys=True))
        raise typer.Exit(0)
    console = Console()
    table = Table(title=f"sandboxharness doctor — {rep.host}, {rep.date}", show_lines=False)
    table.add_column("check")
    table.add_column("ok")
    table.add_column("detail", overflow="fold")
    for name, ok, detail in _rows(rep):
        table.add_row(name, "" if ok is None else _mark(ok), detail)
    console.print(table)
    console.print(f"kernel {rep.kernel} ({rep.arch}), python {rep.python}, euid {rep.euid}")
    console.print(f"[bold]auto backend:[/bold] {rep.auto_backend} — {rep.auto_reason}",
                  highlight=False)
    for warning in rep.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    raise typer.Exit(0)
