"""The static stage: write the sources, run the enabled analysers and the policy checks.

A candidate's code only ever produces findings here; an analyser that fails to run raises
:class:`~sandboxharness.errors.ToolError` (the environment broke, not the candidate).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._internal.files import write_sources
from ..errors import ToolError
from ..models import Definition, Language, Policy, Solution
from ..models.policy import StaticRules
from ..policy import FindingThreshold, ScannableEntry, Utf8Source, Violation
from .ast_checks import AstAnalyzer, source_kind
from .bandit import BanditAnalyzer
from .imports import as_finding, policy_violations
from .interface import Analyzer, Finding
from .semgrep import SemgrepAnalyzer

__all__ = ["StaticReport", "analyzers_for", "is_blocking", "run_static", "scan_files"]

Scanned = tuple[dict[str, str], dict[str, float]]
"""What a scan adds to a report besides findings: tool versions and durations by analyser."""


@dataclass(frozen=True)
class StaticReport:
    findings: list[Finding]
    """Every finding, sorted by path, line, tool and rule."""
    blocking: list[Finding]
    """The findings (same objects) that reject the candidate under the policy."""
    tools: dict[str, str]
    """Analyser name -> version string."""
    durations: dict[str, float]
    """Analyser name (and ``policy``) -> seconds spent."""
    violations: list[Violation] = field(default_factory=list)
    """The policy's violations, each with its reason code, in the order of their findings
    (which are in ``findings`` and ``blocking`` too)."""
    flagged: list[Finding] = field(default_factory=list)
    """The analysers' findings (same objects) at or over the policy's threshold."""
    batch: int = 1
    """How many candidates the analysers ran over together (``run_static_batch``); the
    analysers' ``durations`` are the batch's divided evenly among them."""

    @property
    def passed(self) -> bool:
        return not self.blocking


def is_blocking(finding: Finding, rules: StaticRules) -> bool:
    """For a bare finding: a policy finding always blocks, an analyser's by the threshold.
    (``run_static`` knows which findings are violations without asking.)"""
    return finding.tool == "policy" or FindingThreshold(rules).blocks(finding)


def analyzers_for(rules: StaticRules, language: Language | None = None) -> list[Analyzer]:
    """The analysers a policy enables, cheapest first. For a ``language`` other than plain
    Python (a Triton or CUDA solution), torch compute calls in its Python are findings."""
    out: list[Analyzer] = []
    if rules.ast_rules:
        out.append(AstAnalyzer(forbid_torch_compute=forbids_torch_compute(language)))
    if rules.bandit:
        out.append(BanditAnalyzer())
    if rules.semgrep:
        out.append(SemgrepAnalyzer())
    return out


def forbids_torch_compute(language: Language | None) -> bool:
    """Whether the AST rules treat torch compute calls as findings for this language."""
    return language is not None and language != Language.PYTHON


def scan_files(root: Path, paths: Sequence[str], analyzers: Sequence[Analyzer],
               timeout_s: float) -> tuple[list[Finding], dict[str, str], dict[str, float]]:
    """Run ``analyzers`` over ``paths`` under ``root`` within ``timeout_s`` seconds in all.

    Returns (findings, tool versions, durations).
    """
    deadline = time.monotonic() + timeout_s
    findings: list[Finding] = []
    tools: dict[str, str] = {}
    durations: dict[str, float] = {}
    for analyzer in analyzers:
        found, tools[analyzer.name], spent = scan_one(analyzer, root, paths, deadline=deadline,
                                                      budget_s=timeout_s)
        findings.extend(found)
        durations[analyzer.name] = round(spent, 3)
    return findings, tools, durations


def scan_one(analyzer: Analyzer, root: Path, paths: Sequence[str], *, deadline: float,
             budget_s: float) -> tuple[list[Finding], str, float]:
    """One analyser's run with what is left before ``deadline`` (of ``budget_s`` in all):
    (findings, its version, seconds spent)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise ToolError(f"static analysis ran past its {budget_s:g} s budget before "
                        f"{analyzer.name}")
    t0 = time.monotonic()
    found = analyzer.scan(root, list(paths), left)
    spent = time.monotonic() - t0
    return found, analyzer.version(), spent


def _key(f: Finding) -> tuple[str, int, str, str, str]:
    return (f.path, f.line, f.tool, f.rule_id, f.message)


@dataclass(frozen=True)
class Prepared:
    """One solution's sources written under ``root`` and judged by the policy's source rules:
    what ``run_static`` and ``run_static_batch`` both start from."""

    root: Path
    paths: list[str]
    """The files written (valid UTF-8), relative to ``root``, in the solution's order."""
    violations: list[Violation]
    policy_s: float


def prepare(root: Path, solution: Solution, definition: Definition | None,
            policy: Policy) -> Prepared:
    """Write ``solution``'s sources under ``root`` (an empty private directory) and collect
    its policy violations (UTF-8, a scannable entry, imports and the other source rules)."""
    t0 = time.monotonic()
    violations, paths = _write_sources(root, solution)
    entry = solution.spec.entry_file
    if (v := ScannableEntry().check(solution.spec.language, entry,
                                    source_kind(entry) == "python")) is not None:
        violations.append(v)
    violations += policy_violations(root, paths, policy, definition)
    return Prepared(root=root, paths=paths, violations=violations,
                    policy_s=round(time.monotonic() - t0, 3))


def assemble(prepared: Prepared, found: list[Finding], scanned: Scanned, policy: Policy, *,
             batch: int = 1) -> StaticReport:
    """The report from the analysers' ``found`` findings (paths relative to the solution's
    root) and the solution's violations; ``scanned`` is (tool versions, analyser durations)."""
    tools, spent = scanned
    pairs = sorted(((as_finding(v), v) for v in prepared.violations), key=lambda p: _key(p[0]))
    threshold = FindingThreshold(policy.static)
    flagged = {id(f) for f in found if threshold.blocks(f)}
    findings = sorted([f for f, _ in pairs] + found, key=_key)
    blocking_ids = flagged | {id(f) for f, _ in pairs}
    return StaticReport(findings=findings, blocking=[f for f in findings if id(f) in blocking_ids],
                        tools=dict(tools), durations={"policy": prepared.policy_s, **spent},
                        violations=[v for _, v in pairs],
                        flagged=[f for f in findings if id(f) in flagged], batch=batch)


def private_root(workdir: Path) -> Path:
    """A fresh 0700 directory under ``workdir`` for sources only our analysers read."""
    workdir.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="sources-", dir=workdir))


def run_static(solution: Solution, definition: Definition | None, policy: Policy,
               workdir: Path, *, analyzers: Sequence[Analyzer] | None = None) -> StaticReport:
    """Write ``solution``'s sources into a fresh private directory under ``workdir`` and
    analyse them. ``analyzers`` overrides the policy's choice (tests, custom tool paths)."""
    prepared = prepare(private_root(workdir), solution, definition, policy)
    chosen = (analyzers_for(policy.static, solution.spec.language) if analyzers is None
              else list(analyzers))
    found, tools, spent = scan_files(prepared.root, prepared.paths, chosen,
                                     policy.static.timeout_s)
    return assemble(prepared, found, (tools, spent), policy)


def _write_sources(root: Path, solution: Solution) -> tuple[list[Violation], list[str]]:
    """Sources that are valid UTF-8 are written (0600: for our analysers only)."""
    utf8 = Utf8Source()
    violations, files = [], []
    for src in solution.sources:
        if (v := utf8.check(src.path, src.content)) is not None:
            violations.append(v)
        else:
            files.append((src.path, src.content.encode("utf-8")))
    return violations, write_sources(root, files, mode=0o600)
