"""Profile stage (GPU): Nsight Compute around the candidate's call, one workload per regime.

One sandboxed job, as the sanitizer's: the worker re-executes itself as ``ncu <options>
python -I -m sandboxharness.worker`` (``worker.gpu``), builds or loads the candidate and,
per representative workload, makes one unprofiled warm-up call (compilation, autotuning)
and one profiled call: the worker opens it with cudaProfilerStart and a marker kernel, and
ncu (``--profile-from-start off``) measures only what runs until cudaProfilerStop. The CSV
report ncu writes into the job's out directory is parsed here (``profile.ncu_parse``) into
one signature per regime (``profile.evidence``).

A profiled call holds the GPU's lane exclusive, as a timing window does: ncu replays each
kernel many times and another job's kernels would disturb its counters.

The profile is evidence for the optimisation loop, never a gate: the candidate shares the
profiled process and can write the report's file, so a signature says what the candidate let
the profiler see. A profile that cannot be made (ncu absent or refused, a fault, the time
limit) is recorded with its reason and the stage is skipped, never failed.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from .._internal.files import write_sources
from .._internal.proc import find_executable
from ..archive.collect import publish
from ..errors import ToolError
from ..models import ReasonCode, Stage, StageResult
from ..profile import metrics
from ..profile.evidence import signatures
from ..profile.ncu_parse import NcuParseError, parse
from ..profile.signature import Signature
from ..sandbox.interface import JobSpec
from ..worker.protocol import NO_CUPTI_ENV, SANITIZER_ENV, Call
from . import compile_cuda
from .cases import Case, derive_seed
from .client import WorkerClient, hello_for_candidate
from .context import EvaluationContext, Needs, SoFar, skipped
from .job import Execution, execution, job_spec, solution_files
from .lanes import NO_LANE
from .session import KernelFault, WorkerSession

REPORT = "ncu.csv"
"""ncu's ``--log-file``, relative to the job's out directory."""


def find_ncu() -> str | None:
    home = compile_cuda.cuda_home()
    dirs = [Path(home) / "bin", Path(home) / "nsight-compute"] if home else []
    for search in (dirs, None):
        try:
            return find_executable("ncu", search)
        except ToolError:
            continue
    return None


def regime_of(case: Case) -> str:
    """A regime's name: its variable axes' values (``all`` when nothing varies)."""
    return ",".join(f"{k}={v}" for k, v in sorted(case.axes.items())) or "all"


def representatives(cases: list[Case], k: int) -> list[Case]:
    """One workload-file case per distinct set of variable-axis values, at most ``k``: when
    there are more, evenly spread by size (the smallest and the largest always in)."""
    by_regime: dict[str, Case] = {}
    for c in cases:
        if not c.heldout:
            by_regime.setdefault(regime_of(c), c)
    ordered = sorted(by_regime.values(), key=lambda c: (_elements(c), regime_of(c)))
    if len(ordered) <= k:
        return ordered
    if k == 1:
        return [ordered[-1]]
    picks = sorted({int(i * (len(ordered) - 1) / (k - 1) + 0.5) for i in range(k)})
    return [ordered[i] for i in picks]


def _elements(c: Case) -> int:
    n = 0
    for item in c.payload["inputs"] + c.payload["outputs"]:
        size = 1
        for d in item.get("shape") or []:
            size *= int(d)
        n += size
    return n


def read_report(path: Path, cap: int) -> str | None:
    """The report the sandbox wrote (never through a link; None: absent); larger than
    ``cap`` bytes is a parse error, since a cut report cannot be read honestly."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NcuParseError(f"{path.name} is not a regular file")
        if st.st_size > cap:
            raise NcuParseError(f"{path.name} is {st.st_size} bytes (at most {cap})")
        data = os.read(fd, cap + 1)
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def _job(ctx: EvaluationContext, run: Execution, exe: str, calls: int) -> tuple[JobSpec, list[str]]:
    rules = ctx.policy.profile
    argv = [exe, *metrics.ncu_options(launch_count=calls * (rules.max_kernels_per_call + 1),
                                      log_file=f"../out/{REPORT}")]
    base = compile_cuda.gpu_env() if ctx.on_gpu else {"TRITON_INTERPRET": "1"}  # cpu: tests
    env = {**base, **ctx.lane.env(), NO_CUPTI_ENV: "1", "LC_ALL": "C",
           SANITIZER_ENV: json.dumps(argv)}  # the worker re-execs under ncu, as under the sanitizer
    job = job_spec(ctx.root / "profile", data_dir=run.data_dir, policy=ctx.policy, env=env,
                   gpu=ctx.on_gpu)
    write_sources(job.src_dir, solution_files(ctx.solution))
    compile_cuda.hand_over(run.cand_dir, job.out_dir, ctx.solution.content_hash())
    return job, argv[1:]


def _drive(ctx: EvaluationContext, job: JobSpec, picks: list[Case],
           deadline: float) -> dict[str, Any]:
    """hello -> per regime: warm-up call, profiled call (lane exclusive) -> bye -> exit."""
    proc = ctx.sandbox.start(job, deadline_s=max(deadline - time.monotonic(), 1.0))
    session = WorkerSession(proc, max(deadline - time.monotonic(), 1.0))
    shared = WorkerClient(session, ctx.lane)
    alone = WorkerClient(session, NO_LANE)  # its lane is held exclusive around the call

    def left() -> float:
        return max(deadline - time.monotonic(), 1.0)

    out: dict[str, Any] = {"profiled": 0}
    phase = "compile"
    try:
        shared.hello(hello_for_candidate(ctx.solution), device=ctx.device,
                     timeout_s=min(ctx.policy.limits.compile_timeout_s, left()))
        for i, case in enumerate(picks):
            seed = derive_seed(ctx.seed, "profile", case.id)
            phase = f"warm-up {regime_of(case)}"
            shared.call(Call(case.payload, seed, f"{session.paths.out}/warm_{i}.safetensors"),
                        timeout_s=left())
            phase = f"profiled call {regime_of(case)}"
            out["profiled"] += 1
            with ctx.lane.exclusive():
                alone.call(Call(case.payload, seed, f"{session.paths.out}/prof_{i}.safetensors",
                                profile=True), timeout_s=left())
        phase = "exit"
        shared.bye(timeout_s=left())
        info = proc.wait(left())  # ncu writes its report as the worker exits
        if info is None:
            raise KernelFault(ReasonCode.TIMEOUT, "ncu did not finish before the deadline")
        session.exit = info
    except KernelFault as fault:
        out["fault"] = {"code": fault.code.value, "phase": phase, "message": fault.message[:500]}
    info = session.close()
    out["exit_code"] = info.returncode
    out["stderr_tail"] = (info.stderr or "")[-1500:]
    return out


def run_profile(ctx: EvaluationContext, run: Execution, exe: str,
                reports: dict[str, str] | None = None) -> StageResult:
    """Profile one representative workload per regime; signatures into the details, ncu's
    report (when read) into ``reports`` for the archive."""
    rules = ctx.policy.profile
    t0 = time.monotonic()
    picks = representatives(list(run.cases), rules.max_regimes)
    if not picks:
        return skipped(Stage.PROFILE, "no workload-file case to profile")
    job, options = _job(ctx, run, exe, len(picks))
    try:
        driven = _drive(ctx, job, picks, t0 + rules.timeout_s)
        text = read_report(job.out_dir / REPORT, rules.max_report_bytes)
    except NcuParseError as exc:
        text, driven = None, {"report_error": f"unreadable ncu report: {exc}"}
    finally:
        shutil.rmtree(job.out_dir, ignore_errors=True)  # results and the report: read above
    found: list[Signature | None] = [None] * len(picks)
    errors: list[str] = []
    layout = None
    report_error = driven.pop("report_error", None)
    if text is None and report_error is None:
        report_error = "ncu wrote no report"
    elif text is not None:
        if reports is not None:
            reports[REPORT] = text
        try:
            report = parse(text, max_bytes=rules.max_report_bytes)
            errors, layout = report.errors, report.layout
            found = signatures(report.rows, driven.get("profiled") or 1)
            found += [None] * (len(picks) - len(found))
        except NcuParseError as exc:
            report_error = f"unreadable ncu report: {exc}"
    regimes = [{"regime": regime_of(c), "workload": c.workload, "axes": c.axes,
                "signature": None if s is None else s.model_dump(mode="json")}
               for c, s in zip(picks, found, strict=True)]
    details: dict[str, Any] = {
        "tool": exe, "options": options, "timeout_s": rules.timeout_s,
        "signatures": regimes, "ncu_errors": errors, "layout": layout,
        "evidence": "advisory: measured in the candidate's own process; never a gate",
        **driven}
    got = sum(s is not None for s in found)
    if report_error:
        details["report_error"] = report_error
    if not got:
        why = report_error or (errors[0] if errors else "no kernel of the candidate profiled")
        if "fault" in driven:
            why = f"{driven['fault']['phase']}: {driven['fault']['message'][:200]}"
        details["reason"] = f"no signature: {why}"
        return StageResult(stage=Stage.PROFILE, status="skipped",
                           duration_s=time.monotonic() - t0, details=details)
    return StageResult(stage=Stage.PROFILE, status="passed", duration_s=time.monotonic() - t0,
                       details=details)


class ProfileStage:
    stage = Stage.PROFILE
    needs = Needs.EXCLUSIVE_GPU

    def run(self, ctx: EvaluationContext, so_far: SoFar) -> StageResult:
        failed = so_far.first_failed()
        # a candidate too slow for the speed gate is still worth a signature: the loop needs it
        if failed is not None and failed.stage not in (Stage.CORRECTNESS, Stage.BENCHMARK):
            return skipped(self.stage, so_far.blocked() or "not run")
        if not ctx.on_gpu:
            return skipped(self.stage, "no CUDA device: Nsight Compute needs a GPU")
        if failed is not None and failed.stage is Stage.CORRECTNESS:
            return skipped(self.stage, so_far.blocked() or "not run")
        if not ctx.policy.profile.enabled:
            return skipped(self.stage, "the policy does not profile (profile.enabled is false)")
        exe = find_ncu()
        if exe is None:
            return skipped(self.stage, "ncu (Nsight Compute) not found (CUDA_HOME/bin, PATH)")
        reports: dict[str, str] = {}
        result = run_profile(ctx, execution(ctx, so_far), exe, reports)
        for name, text in reports.items():
            publish(so_far, f"profile/{name}", text)
        return result


__all__ = ["ProfileStage", "find_ncu", "read_report", "regime_of", "representatives",
           "run_profile"]
