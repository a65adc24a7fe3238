"""Sanitizer stage (GPU): compute-sanitizer memcheck / racecheck / initcheck / synccheck.

Each tool gets a sandboxed job of its own: the worker re-executes itself as
``compute-sanitizer --tool T ... python -I -m sandboxharness.worker`` (``worker.gpu``) with
PyTorch's caching allocator off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``: with it on, an overrun
stays inside a cached block and memcheck says nothing), builds or loads the candidate, and
makes ONE call on the smallest workload. The report is parsed here into findings and the
policy (``SanitizerRules``) decides. The job has a hard wall-clock deadline: a hang under
the sanitizer is a reject (TIMEOUT), never a wait.

compute-sanitizer finds honest bugs; it is not a security boundary. A hostile candidate can
notice it is being instrumented and behave; the decisive checks stay on the trusted side.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._internal.files import write_sources
from .._internal.proc import find_executable
from ..archive.collect import publish
from ..errors import InfrastructureError, ToolError
from ..models import Policy, Reason, ReasonCode, Stage, StageResult
from ..sandbox.interface import ExitInfo, JobSpec, SandboxedProcess
from ..worker.protocol import SANITIZER_ENV, SANITIZER_LOG, Call, Hello
from . import compile_cuda
from .cases import Case, derive_seed
from .client import WorkerClient, hello_for_candidate
from .context import EvaluationContext, Needs, SoFar, skipped
from .job import Execution, execution, job_spec, solution_files
from .lanes import GpuLane
from .sanitizer_report import TOOL_BROKEN, SanitizerFinding, parse
from .session import KernelFault, WorkerSession

ERROR_EXITCODE = 86
TOOL_CODES = {
    "memcheck": ReasonCode.SANITIZER_MEMCHECK, "racecheck": ReasonCode.SANITIZER_RACECHECK,
    "initcheck": ReasonCode.SANITIZER_INITCHECK, "synccheck": ReasonCode.SANITIZER_SYNCCHECK,
}
def find_sanitizer() -> str | None:
    home = compile_cuda.cuda_home()
    dirs = [Path(home) / "bin", Path(home) / "compute-sanitizer"] if home else []
    for search in (dirs, None):
        try:
            return find_executable("compute-sanitizer", search)
        except ToolError:
            continue
    return None


def smallest_case(cases: list[Case]) -> Case:
    plain = [c for c in cases if not c.heldout] or cases

    def size(c: Case) -> int:
        n = 0
        for item in c.payload["inputs"] + c.payload["outputs"]:
            shape = item.get("shape") or []
            k = 1
            for d in shape:
                k *= int(d)
            n += k
        return n

    return min(plain, key=size)


# -- one tool --------------------------------------------------------------------------------
@dataclass
class ToolRun:
    tool: str
    job: JobSpec
    proc: SandboxedProcess | None = None
    exit: ExitInfo | None = None
    fault: KernelFault | None = None
    phase: str = "start"
    wall_s: float = 0.0
    report: str = ""


def _job(ctx: EvaluationContext, tool: str, run: Execution, exe: str) -> JobSpec:
    rules = ctx.policy.sanitizer
    argv = [exe, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE),
            "--print-limit", str(rules.print_limit), "--log-file", f"../out/{SANITIZER_LOG}",
            "--show-backtrace", "device"]
    base_env = compile_cuda.gpu_env() if ctx.on_gpu else {"TRITON_INTERPRET": "1"}  # cpu: tests
    env = {**base_env, **ctx.lane.env(), "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
           SANITIZER_ENV: json.dumps(argv)}
    job = job_spec(ctx.root / f"sanitizer-{tool}", data_dir=run.data_dir, policy=ctx.policy,
                   env=env, gpu=ctx.on_gpu)
    write_sources(job.src_dir, solution_files(ctx.solution))
    compile_cuda.hand_over(run.cand_dir, job.out_dir, ctx.solution.content_hash())
    return job


def _drive(run: ToolRun, hello: Hello, case: Case, seed: int, *, policy: Policy,
           deadline: float, device: str, lane: GpuLane) -> None:
    """hello (build/load) -> one call -> bye -> wait for the sanitizer to write its report."""
    if run.proc is None:
        return
    session = WorkerSession(run.proc, max(deadline - time.monotonic(), 1.0))
    worker = WorkerClient(session, lane)
    t0 = time.monotonic()

    def left() -> float:
        return max(deadline - time.monotonic(), 1.0)

    try:
        run.phase = "compile"
        worker.hello(hello, device=device, timeout_s=min(policy.limits.compile_timeout_s, left()))
        run.phase = "call"
        worker.call(Call(case.payload, seed, f"{session.paths.out}/sanitizer_call.safetensors"),
                    timeout_s=left())
    except KernelFault as fault:
        run.fault = fault
    if session.exit is None:  # still alive: let it leave so the sanitizer writes its report
        try:
            worker.bye(timeout_s=left())
            info = run.proc.wait(left())
            if info is None:
                raise KernelFault(ReasonCode.TIMEOUT, "the sanitizer did not finish before "
                                  "the stage's deadline; killed")
            session.exit = info
        except KernelFault as fault:
            run.fault = run.fault or fault
    run.exit = session.close()
    run.wall_s = time.monotonic() - t0


def _blocking(findings: list[SanitizerFinding], tool: str, rules: Any) -> list[SanitizerFinding]:
    out = []
    for f in findings:
        if f.severity == "api":
            if rules.api_errors_fail:
                out.append(f)
        elif f.kind == "Leak" or (tool == "racecheck" and f.severity != "error"):
            continue
        else:
            out.append(f)
    return out


def _judge(run: ToolRun, policy: Policy) -> tuple[list[Reason], dict[str, Any]]:
    rules = policy.sanitizer
    text = compile_cuda.read_capped(run.job.out_dir / SANITIZER_LOG, rules.max_log_bytes) or ""
    findings, total = parse(text, run.tool)
    rc = run.exit.returncode if run.exit else None
    details: dict[str, Any] = {
        "exit_code": rc, "wall_s": round(run.wall_s, 3), "reported_errors": total,
        "findings": [f.as_dict() for f in findings[:rules.print_limit]],
    }
    broken = TOOL_BROKEN.search(text + "\n" + (run.exit.stderr if run.exit else ""))
    if run.fault is not None and run.fault.code != ReasonCode.TIMEOUT and broken:
        raise InfrastructureError(f"compute-sanitizer --tool {run.tool} could not run here: "
                                  f"{broken.group(1)}")
    reasons: list[Reason] = []
    code = TOOL_CODES[run.tool]
    blocking = _blocking(findings, run.tool, rules)
    if run.fault is not None:
        if run.fault.code == ReasonCode.TIMEOUT:
            reasons.append(Reason(code=ReasonCode.TIMEOUT, stage=Stage.SANITIZER,
                                  message=f"{run.tool}: {run.fault.message} (a hang under the "
                                  "sanitizer is a reject)"))
        elif not blocking:
            reasons.append(Reason(code=run.fault.code, stage=Stage.SANITIZER,
                                  message=f"{run.tool}, during {run.phase}: {run.fault.message}"))
        details["fault"] = {"code": run.fault.code.value, "phase": run.phase,
                            "message": run.fault.message[:500]}
    if run.tool in rules.fail_on:
        if blocking:
            first = blocking[0]
            where = f" in {first.kernel}" if first.kernel else ""
            loc = f" ({first.location})" if first.location else ""
            reasons.append(Reason(code=code, stage=Stage.SANITIZER,
                                  message=f"{run.tool}: {first.kind}{where}{loc}, "
                                  f"{sum(f.count for f in blocking)} report(s) in "
                                  f"{len(blocking)} group(s)"))
        elif rc == ERROR_EXITCODE and run.fault is None:
            reasons.append(Reason(code=code, stage=Stage.SANITIZER,
                                  message=f"{run.tool}: error exit code {rc} with no parsable "
                                  "report"))
    if not text:
        details["log"] = "absent"
    else:
        details["log_tail"] = text[-1500:]
    return reasons, details


def run_tools(ctx: EvaluationContext, run: Execution, *, executable: str | None = None,
              reports: dict[str, str] | None = None) -> StageResult:
    """Each policy tool on the smallest workload, in sandboxed jobs of their own.
    ``reports``: filled with each tool's whole report (the details keep its tail)."""
    rules = ctx.policy.sanitizer
    t0 = time.monotonic()
    if not rules.tools:
        return skipped(Stage.SANITIZER, "the policy runs no sanitizer tool")
    exe = executable or find_sanitizer()
    if exe is None:
        raise InfrastructureError("compute-sanitizer not found (CUDA_HOME/bin, PATH)")
    case = smallest_case(run.cases)
    call_seed = derive_seed(ctx.seed, "sanitizer", case.id)
    runs = [ToolRun(t, _job(ctx, t, run, exe)) for t in dict.fromkeys(rules.tools)]
    deadline = time.monotonic() + rules.timeout_s
    hello = hello_for_candidate(ctx.solution)

    def one(r: ToolRun) -> None:
        _drive(r, hello, case, call_seed, policy=ctx.policy, deadline=deadline,
               device=ctx.device, lane=ctx.lane)

    if rules.parallel:
        for r in runs:  # processes start here, in this thread; only the driving is threaded
            r.proc = ctx.sandbox.start(r.job, deadline_s=rules.timeout_s)
        threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in runs]
        for th in threads:
            th.start()
        for th in threads:
            th.join(rules.timeout_s + 30)
    else:
        for r in runs:
            r.proc = ctx.sandbox.start(r.job, deadline_s=max(deadline - time.monotonic(), 1.0))
            one(r)
    reasons: list[Reason] = []
    per_tool: dict[str, Any] = {}
    for r in runs:
        if r.exit is None and r.proc is not None:
            r.exit = r.proc.kill()
        rs, det = _judge(r, ctx.policy)
        reasons.extend(rs)
        per_tool[r.tool] = det
        if reports is not None:
            reports[r.tool] = compile_cuda.read_capped(r.job.out_dir / SANITIZER_LOG,
                                                       rules.max_log_bytes) or ""
    for r in runs:  # build artifacts are large; the reports were read above
        shutil.rmtree(r.job.out_dir, ignore_errors=True)
    details = {"workload": case.workload, "axes": case.axes, "seed": call_seed,
               "calls": 1, "allocator": "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
               "executable": exe, "tools": per_tool, "fail_on": list(rules.fail_on)}
    return StageResult(stage=Stage.SANITIZER, status="failed" if reasons else "passed",
                       duration_s=time.monotonic() - t0, reasons=reasons, details=details)




class SanitizerStage:
    stage = Stage.SANITIZER
    needs = Needs.GPU

    def run(self, ctx: EvaluationContext, so_far: SoFar) -> StageResult:
        failed, why = so_far.first_failed(), so_far.blocked()
        if why and failed is not None and failed.stage is not Stage.CORRECTNESS:
            return skipped(self.stage, why)  # it did not even compile
        if not ctx.on_gpu:
            return skipped(self.stage, "no CUDA device: compute-sanitizer needs a GPU")
        if why:
            return skipped(self.stage, why)
        reports: dict[str, str] = {}
        result = run_tools(ctx, execution(ctx, so_far), reports=reports)
        for tool, text in reports.items():
            publish(so_far, f"sanitizer/{tool}.log", text)
        return result


__all__ = ["SanitizerFinding", "SanitizerStage", "find_sanitizer", "parse", "run_tools",
           "smallest_case"]
