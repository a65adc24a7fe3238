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
        out.append(AstAnalyzer(forbid_torch_compute=language is not None
                               and language != Language.PYTHON))
    if rules.bandit:
        out.append(BanditAnalyzer())
    if rules.semgrep:
        out.append(SemgrepAnalyzer())
    return out


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
        left = deadline - time.monotonic()
        if left <= 0:
            raise ToolError(f"static analysis ran past its {timeout_s:g} s budget before "
                            f"{analyzer.name}")
        t0 = time.monotonic()
        findings.extend(analyzer.scan(root, list(paths), left))
        durations[analyzer.name] = round(time.monotonic() - t0, 3)
        tools[analyzer.name] = analyzer.version()
    return findings, tools, durations


def _key(f: Finding) -> tuple[str, int, str, str, str]:
    return (f.path, f.line, f.tool, f.rule_id, f.message)


def run_static(solution: Solution, definition: Definition | None, policy: Policy,
               workdir: Path, *, analyzers: Sequence[Analyzer] | None = None) -> StaticReport:
    """Write ``solution``'s sources into a fresh private directory under ``workdir`` and
    analyse them. ``analyzers`` overrides the policy's choice (tests, custom tool paths)."""
    workdir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="sources-", dir=workdir))
    t0 = time.monotonic()
    violations, paths = _write_sources(root, solution)
    entry = solution.spec.entry_file
    if (v := ScannableEntry().check(solution.spec.language, entry,
                                    source_kind(entry) == "python")) is not None:
        violations.append(v)
    violations += policy_violations(root, paths, policy, definition)
    durations = {"policy": round(time.monotonic() - t0, 3)}
    chosen = (analyzers_for(policy.static, solution.spec.language) if analyzers is None
              else list(analyzers))
    found, tools, spent = scan_files(root, paths, chosen, policy.static.timeout_s)
    durations.update(spent)
    pairs = sorted(((as_finding(v), v) for v in violations), key=lambda p: _key(p[0]))
    threshold = FindingThreshold(policy.static)
    flagged = {id(f) for f in found if threshold.blocks(f)}
    findings = sorted([f for f, _ in pairs] + found, key=_key)
    blocking_ids = flagged | {id(f) for f, _ in pairs}
    return StaticReport(findings=findings, blocking=[f for f in findings if id(f) in blocking_ids],
                        tools=tools, durations=durations, violations=[v for _, v in pairs],
                        flagged=[f for f in findings if id(f) in flagged])


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
