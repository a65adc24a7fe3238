"""The static stage: write the sources, run the enabled analysers and the policy checks.

A candidate's code only ever produces findings here; an analyser that fails to run raises
:class:`~sandboxharness.errors.ToolError` (the environment broke, not the candidate).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import ToolError
from ..models import Definition, Language, Policy, Solution
from ..models.policy import StaticRules
from .ast_checks import AstAnalyzer, source_kind
from .bandit import BanditAnalyzer
from .imports import check_policy
from .interface import SEVERITY_RANK, Analyzer, Finding
from .semgrep import SemgrepAnalyzer

__all__ = ["StaticReport", "analyzers_for", "is_blocking", "run_static", "scan_files"]

_PYTHON_LANGUAGES = {Language.PYTHON, Language.TRITON, Language.TILELANG}


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

    @property
    def passed(self) -> bool:
        return not self.blocking


def is_blocking(finding: Finding, rules: StaticRules) -> bool:
    """``policy.*`` always blocks; otherwise severity >= ``fail_on`` unless the rule is ignored."""
    if finding.rule_id.startswith("policy."):
        return True
    if finding.rule_id in rules.ignore_rules:
        return False
    return SEVERITY_RANK[finding.severity] >= SEVERITY_RANK[rules.fail_on]


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


def run_static(solution: Solution, definition: Definition | None, policy: Policy,
               workdir: Path, *, analyzers: Sequence[Analyzer] | None = None) -> StaticReport:
    """Write ``solution``'s sources into a fresh private directory under ``workdir`` and
    analyse them. ``analyzers`` overrides the policy's choice (tests, custom tool paths)."""
    workdir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="sources-", dir=workdir))
    t0 = time.monotonic()
    findings, paths = _write_sources(root, solution)
    findings += _entry_findings(solution)
    findings += check_policy(root, paths, policy, definition)
    durations = {"policy": round(time.monotonic() - t0, 3)}
    chosen = (analyzers_for(policy.static, solution.spec.language) if analyzers is None
              else list(analyzers))
    found, tools, spent = scan_files(root, paths, chosen, policy.static.timeout_s)
    findings += found
    durations.update(spent)
    findings.sort(key=lambda f: (f.path, f.line, f.tool, f.rule_id, f.message))
    blocking = [f for f in findings if is_blocking(f, policy.static)]
    return StaticReport(findings=findings, blocking=blocking, tools=tools, durations=durations)


def _write_sources(root: Path, solution: Solution) -> tuple[list[Finding], list[str]]:
    findings: list[Finding] = []
    written: list[str] = []
    for src in solution.sources:
        rel = PurePosixPath(src.path)
        if rel.is_absolute() or ".." in rel.parts:  # validated already; never trust twice-read
            raise ToolError(f"unsafe source path {src.path!r} reached the static stage")
        try:
            data = src.content.encode("utf-8")
        except UnicodeEncodeError as exc:
            findings.append(Finding(tool="policy", rule_id="policy.invalid-source",
                                    severity="high", path=src.path, line=1,
                                    message=f"not encodable as UTF-8 ({exc.reason})"))
            continue
        target = root.joinpath(*rel.parts)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        written.append(src.path)
    return findings, written


def _entry_findings(solution: Solution) -> list[Finding]:
    entry = solution.spec.entry_file
    if solution.spec.language in _PYTHON_LANGUAGES and source_kind(entry) != "python":
        return [Finding(tool="policy", rule_id="policy.unscannable-entry", severity="high",
                        path=entry, line=1,
                        message=f"a {solution.spec.language.value} entry file must end in .py "
                        "(other names are not analysed as Python)")]
    return []
