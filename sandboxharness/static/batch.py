"""The static stage for many candidates at once: one bandit and one semgrep process per batch.

A tool's start-up (seconds for semgrep) dwarfs its work on one kernel, so a batch pays it
once. Each solution's sources go into their own subdirectory ``<root>/<k>/`` (``k`` its
index), each analyser runs once over every subdirectory of the members it applies to, and
each finding goes back to the member its path's first component names, with that component
removed. The analysers never put a path in a message (bandit and semgrep only ever see
neutral staged names, which our adapters map back; the AST rules name lines, not files), so
stripping the path is the whole mapping.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import ToolError
from ..models import Definition, Policy, Solution
from .ast_checks import AstAnalyzer
from .interface import Analyzer, Finding
from .runner import Prepared, StaticReport, analyzers_for, assemble, prepare, private_root, scan_one

__all__ = ["BATCH_BUDGET_CAP_S", "batch_budget_s", "run_static_batch"]

BATCH_BUDGET_CAP_S = 1800.0
"""The most a batch may take, whatever its size (unless one member's own budget is more): a
hung tool should fail the batch soon, so the caller can fall back to one by one."""

Plan = tuple[Analyzer, list[int]]
"""An analyser and the members (indices) it runs over."""


def batch_budget_s(timeout_s: float, members: int) -> float:
    """``timeout_s`` per member, at most :data:`BATCH_BUDGET_CAP_S` (never less than one
    member's ``timeout_s``)."""
    return min(timeout_s * max(members, 1), max(timeout_s, BATCH_BUDGET_CAP_S))


def run_static_batch(items: Sequence[tuple[Solution, Definition | None]], policy: Policy,
                     workdir: Path, *, analyzers: Sequence[Analyzer] | None = None
                     ) -> list[StaticReport]:
    """What ``run_static(solution, definition, policy, ...)`` returns for each of ``items``,
    in order, with one process per analyser for the whole batch.

    Findings, blocking, flagged, violations and tool versions are exactly the one-by-one
    ones; ``durations`` hold each member's own policy time and the batch's analyser times
    divided evenly among its members, and ``batch`` is the batch's size. The analysers share
    :func:`batch_budget_s` (the policy's ``static.timeout_s`` per member, capped).

    Raises :class:`ToolError` for the whole batch when an analyser fails or the budget runs
    out; a caller that wants each candidate's own answer then falls back to ``run_static``
    one by one (a tool failure there is that candidate's alone).
    """
    if not items:
        return []
    root = private_root(workdir)
    prepared = []
    for k, (solution, definition) in enumerate(items):
        (root / str(k)).mkdir(mode=0o700)
        prepared.append(prepare(root / str(k), solution, definition, policy))
    n = len(items)
    found, tools, spent = _scan(root, prepared, _plans(items, policy, analyzers),
                                batch_budget_s(policy.static.timeout_s, n))
    durations = {name: round(s / n, 3) for name, s in spent.items()}
    return [assemble(p, found[k], (tools[k], durations), policy, batch=n)
            for k, p in enumerate(prepared)]


def _plans(items: Sequence[tuple[Solution, Definition | None]], policy: Policy,
           analyzers: Sequence[Analyzer] | None) -> list[Plan]:
    """Which analyser runs over which members, in the order ``run_static`` runs them."""
    members = list(range(len(items)))
    if analyzers is not None:
        return [(a, members) for a in analyzers]
    plans: dict[tuple[str, bool], Plan] = {}
    for k, (solution, _) in enumerate(items):
        for a in analyzers_for(policy.static, solution.spec.language):
            # Only the AST rules depend on the language (torch compute in a Triton or CUDA
            # solution); ``analyzers_for`` builds every other analyser alike for all members.
            key = (a.name, isinstance(a, AstAnalyzer) and a.forbid_torch_compute)
            plans.setdefault(key, (a, []))[1].append(k)
    return list(plans.values())


def _scan(root: Path, prepared: list[Prepared], plans: list[Plan], budget_s: float
          ) -> tuple[list[list[Finding]], list[dict[str, str]], dict[str, float]]:
    """Run each plan once; (findings per member, versions per member, seconds by analyser)."""
    deadline = time.monotonic() + budget_s
    found: list[list[Finding]] = [[] for _ in prepared]
    tools: list[dict[str, str]] = [{} for _ in prepared]
    spent: dict[str, float] = {}
    for analyzer, members in plans:
        paths = [f"{k}/{p}" for k in members for p in prepared[k].paths]
        hits, version, seconds = scan_one(analyzer, root, paths, deadline=deadline,
                                          budget_s=budget_s)
        spent[analyzer.name] = spent.get(analyzer.name, 0.0) + seconds
        for k in members:
            tools[k][analyzer.name] = version
        by_dir = {str(k): k for k in members}
        for f in hits:
            k, rel = _member_of(f, by_dir, analyzer.name)
            found[k].append(dataclasses.replace(f, path=rel))
    return found, tools, spent


def _member_of(f: Finding, by_dir: dict[str, int], tool: str) -> tuple[int, str]:
    """The member a finding belongs to (its path's first component only: ``0/1/x.py`` is
    member 0's ``1/x.py``) and its path relative to that member's root."""
    head, _, rel = f.path.partition("/")
    if head not in by_dir or not rel:
        raise ToolError(f"{tool} reported a finding outside the batch's members: {f.path!r}")
    return by_dir[head], rel
