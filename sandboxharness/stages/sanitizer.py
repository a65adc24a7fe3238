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
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._internal.proc import find_executable
from ..errors import InfrastructureError, ToolError
from ..models import Definition, Policy, Reason, ReasonCode, Solution, Stage, StageResult
from ..sandbox.interface import ExitInfo, JobSpec, Sandbox, SandboxedProcess
from ..worker.gpu import SANITIZER_ENV, SANITIZER_LOG
from . import compile_cuda
from .cases import Case, derive_seed
from .session import KernelFault, WorkerSession

ERROR_EXITCODE = 86
TOOL_CODES = {
    "memcheck": ReasonCode.SANITIZER_MEMCHECK, "racecheck": ReasonCode.SANITIZER_RACECHECK,
    "initcheck": ReasonCode.SANITIZER_INITCHECK, "synccheck": ReasonCode.SANITIZER_SYNCCHECK,
}
_PREFIX = re.compile(r"^=+ ?")
_STARTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(Invalid (?:__\w+__ )?(?:read|write|atomic)) of size (\d+) bytes?"), "access"),
    (re.compile(r"^(Misaligned (?:__\w+__ )?(?:read|write|atomic|address))"), "misaligned"),
    (re.compile(r"^(Uninitialized __\w+__ memory read) of size (\d+) bytes?"), "uninit"),
    (re.compile(r"^(Error|Warning): (Race reported) between (\w+) access at (.+?)$"), "race"),
    (re.compile(r"^(ERROR|WARNING): Potential (\w+) hazard detected at (__\w+__) (0x[0-9a-f]+)"),
     "hazard"),
    (re.compile(r"^(Barrier error detected)\.?\s*(.*)$"), "barrier"),
    (re.compile(r"^(Invalid arguments? detected for \S+|Invalid __syncwarp.*|Illegal .*)$"),
     "sync"),
    (re.compile(r"^Program hit (\S+) \(error (\d+)\) due to \"(.+?)\" on CUDA API call to "
                r"(\S+?)\.?$"), "api"),
    (re.compile(r"^(Leaked) (\d+) bytes"), "leak"),
    (re.compile(r"^(Out-of-range Shared or Local Address|Illegal Address|"
                r"Hardware Exception.*|Malloc/Free Error.*|Device Heap.*)$"), "other"),
]
_AT = re.compile(r"^(?:at|and \w+ access at) (\S.*?)(?:\+0x[0-9a-f]+)?(?: in (\S+:\d+))?"
                 r"(?: \[(\d+) hazards?\])?$")
_ADDR = re.compile(r"Address (0x[0-9a-f]+)")
_NEAR = re.compile(r"(\d+) bytes (before|after) the nearest allocation at (0x[0-9a-f]+) "
                   r"of size (\d+) bytes")
_SUMMARY = re.compile(r"^(?:ERROR SUMMARY|RACECHECK SUMMARY): (\d+) (?:errors?|hazards?)")
_TOOL_BROKEN = re.compile(r"(Device not supported|Internal Sanitizer Error|"
                          r"Target application terminated before first instrumented API call|"
                          r"Unable to find injection library|"
                          r"cannot start compute-sanitizer)", re.IGNORECASE)


@dataclass
class Finding:
    tool: str
    kind: str
    kernel: str | None = None
    location: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    count: int = 1
    severity: str = "error"

    def as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "kind": self.kind, "kernel": self.kernel,
                "location": self.location, "count": self.count, "severity": self.severity,
                **self.detail}


def _kernel_name(text: str) -> str:
    name = text.strip()
    depth, out = 0, []
    for ch in name:  # drop the parameter list of a demangled signature
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip()[:160] or name[:160]


def parse(text: str, tool: str) -> tuple[list[Finding], int | None]:
    """Findings (grouped by kind + kernel + location) and the reported error total."""
    groups: dict[tuple[str, str | None, str | None], Finding] = {}
    order: list[Finding] = []
    total: int | None = None
    current: Finding | None = None

    def close() -> None:
        nonlocal current
        if current is None:
            return
        key = (current.kind, current.kernel, current.location)
        if key in groups:
            groups[key].count += current.count
        else:
            groups[key] = current
            order.append(current)
        current = None

    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if not line:
            continue
        m = _SUMMARY.match(line)
        if m:
            close()
            total = (total or 0) + int(m.group(1))
            continue
        started = False
        for pattern, what in _STARTS:
            m = pattern.match(line)
            if not m:
                continue
            close()
            started = True
            if what in ("access", "uninit"):
                current = Finding(tool, m.group(1), detail={"size_bytes": int(m.group(2))})
            elif what == "race":
                current = Finding(tool, f"{m.group(2)} ({m.group(3)} vs ...)",
                                  severity=m.group(1).lower())
                _apply_at(current, "at " + m.group(4))
            elif what == "hazard":
                current = Finding(tool, f"Potential {m.group(2)} hazard at {m.group(3)}",
                                  severity=m.group(1).lower(), detail={"address": m.group(4)})
            elif what == "api":
                current = Finding(tool, "CUDA API error", severity="api",
                                  detail={"error": m.group(1), "api": m.group(4),
                                          "message": m.group(3)[:200]})
            elif what == "leak":
                current = Finding(tool, "Leak", detail={"bytes": int(m.group(2))},
                                  severity="warning")
            else:
                current = Finding(tool, m.group(1)[:160])
            break
        if started or current is None:
            continue
        if line.startswith("and ") and current.kind.startswith("Race reported"):
            m2 = re.match(r"and (\w+) access at", line)
            if m2:
                current.kind = current.kind.replace("vs ...", f"vs {m2.group(1)}")
            at = _AT.match(line)
            if at and at.group(3):
                current.count = int(at.group(3))
            continue
        if line.startswith("at ") and current.kernel is None:
            _apply_at(current, line)
            continue
        m3 = _ADDR.search(line)
        if m3 and "address" not in current.detail:
            current.detail["address"] = m3.group(1)
        m4 = _NEAR.search(line)
        if m4:
            current.detail.update(offset_bytes=int(m4.group(1)), side=m4.group(2),
                                  allocation_size=int(m4.group(4)))
        if line.startswith("by thread") and "first_thread" not in current.detail:
            current.detail["first_thread"] = line[len("by thread "):][:80]
    close()
    return order, total


def _apply_at(finding: Finding, line: str) -> None:
    m = _AT.match(line)
    if not m:
        return
    finding.kernel = _kernel_name(m.group(1))
    finding.location = m.group(2)
    if m.group(3):
        finding.count = int(m.group(3))


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


def _job(root: Path, tool: str, solution: Solution, policy: Policy, data_dir: Path,
         exe: str, cand_out: Path, gpu: bool = True) -> JobSpec:
    base = root / f"sanitizer-{tool}"
    dirs = {k: base / k for k in ("src", "out", "tmp")}
    for d in dirs.values():
        d.mkdir(parents=True, mode=0o700)
    for src in solution.sources:
        path = dirs["src"] / src.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src.content, encoding="utf-8")
    compile_cuda.hand_over(cand_out, dirs["out"], solution.content_hash())
    rules = policy.sanitizer
    argv = [exe, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE),
            "--print-limit", str(rules.print_limit), "--log-file", f"../out/{SANITIZER_LOG}",
            "--show-backtrace", "device"]
    base_env = compile_cuda.gpu_env() if gpu else {"TRITON_INTERPRET": "1"}  # cpu: tests only
    env = {**base_env, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", SANITIZER_ENV: json.dumps(argv)}
    return JobSpec(role=f"sanitizer-{tool}", src_dir=dirs["src"], data_dir=data_dir,
                   out_dir=dirs["out"], tmp_dir=dirs["tmp"], limits=policy.limits, env=env,
                   gpu=gpu)


def _drive(run: ToolRun, hello: dict[str, Any], case: Case, seed: int, policy: Policy,
           deadline: float, device: str) -> None:
    """hello (build/load) -> one call -> bye -> wait for the sanitizer to write its report."""
    if run.proc is None:
        return
    session = WorkerSession(run.proc, max(deadline - time.monotonic(), 1.0))
    paths = run.proc.paths
    t0 = time.monotonic()

    def left() -> float:
        return max(deadline - time.monotonic(), 1.0)

    try:
        run.phase = "compile"
        session.request({**hello, "op": "hello", "src": paths.src, "data": paths.data,
                         "out": paths.out, "device": device},
                        min(policy.limits.compile_timeout_s, left()),
                        fail_code=ReasonCode.COMPILE_ERROR)
        run.phase = "call"
        session.request({"op": "call", "case": case.payload, "seed": seed,
                         "save": f"{paths.out}/sanitizer_call.safetensors"}, left())
    except KernelFault as fault:
        run.fault = fault
    if session.exit is None:  # still alive: let it leave so the sanitizer writes its report
        try:
            session.request({"op": "bye"}, left())
            info = run.proc.wait(left())
            if info is None:
                raise KernelFault(ReasonCode.TIMEOUT, "the sanitizer did not finish before "
                                  "the stage's deadline; killed")
            session.exit = info
        except KernelFault as fault:
            run.fault = run.fault or fault
    run.exit = session.close()
    run.wall_s = time.monotonic() - t0


def _blocking(findings: list[Finding], tool: str, rules: Any) -> list[Finding]:
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
    broken = _TOOL_BROKEN.search(text + "\n" + (run.exit.stderr if run.exit else ""))
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


def run(sandbox: Sandbox, definition: Definition, solution: Solution, cases: list[Case],
        policy: Policy, seed: int, root: Path, data_dir: Path, hello: dict[str, Any],
        cand_out: Path, *, device: str = "cuda", executable: str | None = None) -> StageResult:
    rules = policy.sanitizer
    t0 = time.monotonic()
    if not rules.tools:
        return StageResult(stage=Stage.SANITIZER, status="skipped", duration_s=0.0,
                           details={"reason": "the policy runs no sanitizer tool"})
    exe = executable or find_sanitizer()
    if exe is None:
        raise InfrastructureError("compute-sanitizer not found (CUDA_HOME/bin, PATH)")
    case = smallest_case(cases)
    call_seed = derive_seed(seed, "sanitizer", case.id)
    runs = [ToolRun(t, _job(root, t, solution, policy, data_dir, exe, cand_out, device != "cpu"))
            for t in dict.fromkeys(rules.tools)]
    deadline = time.monotonic() + rules.timeout_s

    def one(r: ToolRun) -> None:
        _drive(r, hello, case, call_seed, policy, deadline, device)

    if rules.parallel:
        for r in runs:  # processes start here, in this thread; only the driving is threaded
            r.proc = sandbox.start(r.job, deadline_s=rules.timeout_s)
        threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in runs]
        for th in threads:
            th.start()
        for th in threads:
            th.join(rules.timeout_s + 30)
    else:
        for r in runs:
            r.proc = sandbox.start(r.job, deadline_s=max(deadline - time.monotonic(), 1.0))
            one(r)
    reasons: list[Reason] = []
    per_tool: dict[str, Any] = {}
    for r in runs:
        if r.exit is None and r.proc is not None:
            r.exit = r.proc.kill()
        rs, det = _judge(r, policy)
        reasons.extend(rs)
        per_tool[r.tool] = det
    for r in runs:  # build artifacts are large; the reports were read above
        shutil.rmtree(r.job.out_dir, ignore_errors=True)
    details = {"workload": case.workload, "axes": case.axes, "seed": call_seed,
               "calls": 1, "allocator": "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
               "executable": exe, "tools": per_tool, "fail_on": list(rules.fail_on)}
    return StageResult(stage=Stage.SANITIZER, status="failed" if reasons else "passed",
                       duration_s=time.monotonic() - t0, reasons=reasons, details=details)


__all__ = ["Finding", "find_sanitizer", "parse", "run", "smallest_case"]
