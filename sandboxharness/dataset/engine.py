"""Run a whole dataset: every selected solution on its definition's workloads.

The coordinator (the caller's thread) checks every pair before any candidate code runs, then
hands candidates to an executor (threads here, Ray tasks in ``dataset.ray_exec``) and alone
writes what comes back: the traces (``tracefile.TraceWriter``) and, through ``record``, the
audit log. Candidates run side by side, each with its own sandboxed jobs; on a GPU machine each
is placed on a lane (``stages.lanes``) whose timing windows are exclusive.

A rejection is a result. A candidate whose evaluation raised (bad input found late, such as a
definition's reference failing; a harness failure) gets no verdict: its error is kept, the
others go on, and the run's exit code says which family failed.
"""

from __future__ import annotations

import concurrent.futures as cf
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .._internal import host
from ..archive import Archive
from ..errors import HarnessError, InfrastructureError, InputError
from ..intake import check_pairing
from ..models import Policy, StageResult, Verdict
from ..stages.cases import derive_seed, pick_workloads
from ..stages.lanes import GpuLane, Lanes
from ..stages.reftimes import ReferenceTimings
from ..traces import to_traces
from .layout import Dataset, DefinitionEntry, SolutionEntry, load_dataset, select
from .tracefile import TraceWriter, traced
from .verdictstore import VerdictWriter

if TYPE_CHECKING:
    from ..sandbox.interface import Sandbox

STATIC_BATCH = 32
"""Candidates per static-analysis batch (one process per analyser per batch)."""


@dataclass(frozen=True)
class RunOptions:
    policy: Policy
    backend: str | None = None
    jobs: int = 1
    """Candidates evaluated at once."""
    gpus: Sequence[int] | None = None
    """GPU indices to use, one timing lane each; None: every visible GPU."""
    resume: bool = False
    seed: int | None = None
    """Run seed; each definition's seed is derived from it (random, and recorded, if None)."""
    definitions: Sequence[str] = ()
    solutions: Sequence[str] = ()
    hidden_paths: Sequence[Path] = ()
    archive: Path | None = None
    """Archive every candidate's artifacts and verdict here (``sandboxharness.archive``), from
    wherever it is evaluated: under Ray each node writes to this path, so it must be storage
    the nodes share (what one node's disk holds alone, ``archive verify`` reports missing)."""


@dataclass(frozen=True)
class Task:
    """One candidate to evaluate: names only, so a task can travel to another process."""

    definition: str
    solution: str
    seed: int
    index: int


@dataclass
class Outcome:
    task: Task
    verdict: Verdict | None = None
    error: HarnessError | None = None
    wall_s: float = 0.0
    traces: int = 0


@dataclass
class RunEvent:
    """What the run reports as it goes: ``start`` (a candidate began), ``stage`` (one of its
    stages finished), ``done`` (its outcome is recorded), ``skip`` (``--resume``)."""

    kind: str
    task: Task
    stage: StageResult | None = None
    outcome: Outcome | None = None


@dataclass
class RunSummary:
    seed: int
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: list[Task] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def exit_code(self) -> int:
        """0: every candidate has a verdict; 2: bad input found during the run; 3: harness."""
        errors = [o.error for o in self.outcomes if o.error is not None]
        if any(not isinstance(e, InputError) for e in errors):
            return 3
        return 2 if errors else 0

    def counts(self) -> dict[str, int]:
        out = {"promote": 0, "reject": 0, "error": 0, "skipped": len(self.skipped)}
        for o in self.outcomes:
            out[o.verdict.decision if o.verdict else "error"] += 1
        return out


OnEvent = Callable[[RunEvent], None]
Evaluate = Callable[[Task, OnEvent], Verdict]


class Executor(Protocol):
    """Runs ``evaluate`` for every task and yields each outcome as it finishes. An executor
    whose class sets ``remote = True`` evaluates elsewhere (``dataset.ray_exec``): the
    driver then builds no sandbox backend of its own."""

    def run(self, tasks: Sequence[Task], evaluate: Evaluate, on_event: OnEvent
            ) -> Iterator[Outcome]: ...


def outcome_of(task: Task, evaluate: Evaluate, on_event: OnEvent) -> Outcome:
    """Evaluate one task; a harness error is kept with the task, anything else propagates."""
    t0 = time.monotonic()
    on_event(RunEvent("start", task))
    try:
        verdict = evaluate(task, on_event)
    except HarnessError as exc:
        return Outcome(task, error=exc, wall_s=time.monotonic() - t0)
    return Outcome(task, verdict=verdict, wall_s=time.monotonic() - t0)


class ThreadExecutor:
    """Candidates side by side in threads of this process (each one's jobs are sandboxed)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)

    def run(self, tasks: Sequence[Task], evaluate: Evaluate, on_event: OnEvent
            ) -> Iterator[Outcome]:
        pool = cf.ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="candidate")
        try:
            futures = [pool.submit(outcome_of, t, evaluate, on_event) for t in tasks]
            for fut in cf.as_completed(futures):
                yield fut.result()
        finally:  # an interrupt: nothing new starts; running jobs were killed by the handler
            pool.shutdown(wait=True, cancel_futures=True)


def visible_gpus() -> list[int]:
    import torch

    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


class DatasetRun:
    """One ``run --local``: the dataset, the pairs, the seeds, and the writers."""

    def __init__(self, root: str | Path, options: RunOptions) -> None:
        self.options = options
        self.dataset: Dataset = load_dataset(root)
        self.seed = secrets.randbits(53) if options.seed is None else options.seed
        self.pairs = select(self.dataset, definitions=options.definitions,
                            solutions=options.solutions)
        if not self.pairs:
            raise InputError("the dataset has no solution to run (or none matches the "
                             "filters)", where=str(root))
        for d, s in self.pairs:  # every pair checked before any candidate code runs
            if not d.workloads:
                raise InputError(f"definition {d.definition.name!r} has no workloads in the "
                                 "dataset", where=str(s.path))
            check_pairing(d.definition, s.solution, list(d.workloads), where=str(s.path))
        self.writer = TraceWriter()
        self.verdicts = VerdictWriter(self.dataset.root)
        self.static_reports: dict[str, object] = {}
        self.reference_timings = ReferenceTimings()
        self._by_name = {s.solution.name: (d, s) for d, s in self.pairs}

    def tasks(self) -> tuple[list[Task], list[Task]]:
        """(to run, already traced under this harness version and policy)."""
        todo, done = [], []
        version = host.harness_version()
        policy_sha = self.options.policy.content_hash()
        cache: dict[str, set[tuple[str, str]]] = {}
        for i, (d, s) in enumerate(self.pairs):
            name = d.definition.name
            task = Task(name, s.solution.name, derive_seed(self.seed, "definition", name), i)
            if self.options.resume:
                if name not in cache:
                    cache[name] = traced(self.dataset.trace_path(d.definition),
                                         harness=version, policy_sha256=policy_sha)
                want = {w.workload.uuid for w in pick_workloads(
                    list(d.workloads), self.options.policy.correctness.max_workloads)}
                if want <= {u for sol, u in cache[name] if sol == s.solution.name}:
                    done.append(task)
                    continue
            todo.append(task)
        return todo, done

    def pair(self, task: Task) -> tuple[DefinitionEntry, SolutionEntry]:
        return self._by_name[task.solution]

    def analyse_sources(self, tasks: Sequence[Task], batch: int = STATIC_BATCH) -> None:
        """Static analysis for ``tasks`` in batches (one bandit, one semgrep per batch), kept
        for their static stage. A batch whose tools fail is left to each candidate's own
        static stage, where a failure is that candidate's alone."""
        from ..errors import ToolError
        from ..policy import solution_violations
        from ..static.batch import run_static_batch

        policy = self.options.policy
        pairs = [self.pair(t) for t in tasks]
        # sources the policy refuses are never handed to the analysers
        todo = [(d, s) for d, s in pairs if not solution_violations(s.solution, policy)]
        for i in range(0, len(todo), batch):
            chunk = todo[i:i + batch]
            with tempfile.TemporaryDirectory(prefix="shx-static-") as tmp:
                try:
                    reports = run_static_batch([(s.solution, d.definition) for d, s in chunk],
                                               policy, Path(tmp))
                except ToolError:
                    continue
            for (_, s), report in zip(chunk, reports, strict=True):
                self.static_reports[s.solution.name] = report

    def write_traces(self, outcome: Outcome) -> int:
        if outcome.verdict is None:
            return 0
        d, _ = self.pair(outcome.task)
        traces = to_traces(outcome.verdict, list(d.workloads))
        self.verdicts.append(d.definition, outcome.verdict)  # the whole verdict, for reports
        return self.writer.append(self.dataset.trace_path(d.definition), traces)


def local_evaluator(run: DatasetRun, lanes: Lanes) -> Evaluate:
    """Evaluate tasks in this process: one sandbox backend for the run, a Harness per task."""
    from ..sandbox import select_backend

    opts = run.options
    archive = Archive(opts.archive, create=True) if opts.archive is not None else None
    # the dataset too: other candidates' sources, traces and stored verdicts (which name the
    # run's held-out sizes) are in it, and the worker needs nothing there (blobs are staged)
    hidden = [*opts.hidden_paths, run.dataset.root,
              *([archive.root] if archive is not None else [])]
    sandbox = select_backend(opts.backend or opts.policy.sandbox.backend, opts.policy,
                             hidden_paths=[p for p in hidden if Path(p).exists()])

    def evaluate(task: Task, on_event: OnEvent) -> Verdict:
        d, s = run.pair(task)
        with lanes.place() as lane:
            return _evaluate(task, (d, s), run, lane=lane, sandbox=sandbox, on_event=on_event,
                             archive=archive)

    return evaluate


def _evaluate(task: Task, pair: tuple[DefinitionEntry, SolutionEntry], run: DatasetRun, *,
              lane: GpuLane, sandbox: Sandbox, on_event: OnEvent,
              archive: Archive | None = None) -> Verdict:
    from ..pipeline import Harness

    d, s = pair
    harness = Harness(run.options.policy, sandbox=sandbox, archive=archive,
                      observer=lambda r: on_event(RunEvent("stage", task, stage=r)))
    return harness.evaluate(d.definition, s.solution, list(d.workloads), seed=task.seed,
                            blob_root=run.dataset.root, lane=lane,
                            static_report=run.static_reports.get(s.solution.name),
                            reference_timings=run.reference_timings)


def _evaluated_elsewhere(task: Task, on_event: OnEvent) -> Verdict:
    raise InfrastructureError("a remote executor called the driver's evaluator")


Record = Callable[[Verdict], None]


def run_dataset(root: str | Path, options: RunOptions, *, on_event: OnEvent | None = None,
                record: Record | None = None, executor: Executor | None = None,
                evaluate: Evaluate | None = None,
                on_plan: Callable[[int], None] | None = None) -> RunSummary:
    """Evaluate the dataset at ``root``; traces go into ``root/traces/``. ``record`` is called
    with every verdict, in the coordinator's thread, after its traces are written (the audit
    log's single writer). Raises InputError before anything runs for bad input.
    ``executor``/``evaluate``: where and how candidates run (default: threads here, one sandbox
    backend for the run); ``on_plan`` gets the number of candidates before the first starts."""
    t0 = time.monotonic()
    run = DatasetRun(root, options)
    todo, done = run.tasks()
    emit = on_event or (lambda _e: None)
    lock = threading.Lock()

    def safe_emit(event: RunEvent) -> None:  # events come from every candidate's thread
        with lock:
            emit(event)

    if on_plan is not None:
        on_plan(len(todo) + len(done))
    summary = RunSummary(seed=run.seed, skipped=done)
    for task in done:
        safe_emit(RunEvent("skip", task))
    chosen = executor or ThreadExecutor(options.jobs)
    if evaluate is None and getattr(chosen, "remote", False):
        evaluate = _evaluated_elsewhere
    if evaluate is None:
        gpus = list(options.gpus) if options.gpus is not None else visible_gpus()
        evaluate = local_evaluator(run, Lanes(gpus))
        run.analyse_sources(todo)
    for outcome in chosen.run(todo, evaluate, safe_emit):
        outcome.traces = run.write_traces(outcome)
        if outcome.verdict is not None and record is not None:
            record(outcome.verdict)
        summary.outcomes.append(outcome)
        safe_emit(RunEvent("done", outcome.task, outcome=outcome))
    summary.outcomes.sort(key=lambda o: o.task.index)
    summary.wall_s = time.monotonic() - t0
    return summary


__all__ = ["DatasetRun", "Executor", "Outcome", "RunEvent", "RunOptions",
           "RunSummary", "Task", "ThreadExecutor", "run_dataset"]
