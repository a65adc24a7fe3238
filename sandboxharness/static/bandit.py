"""bandit adapter: the real tool as a subprocess, its JSON translated into findings.

bandit silently skips files under ``__pycache__``, ``CVS``, ``*.egg`` and friends even when
they are named on the command line, so the sources are staged under neutral names
(``f0000.py``) in a private directory, and every staged file must appear in bandit's report:
a file it did not look at is a tool failure, never a clean result. ``--ignore-nosec`` makes
a candidate's ``# nosec`` comments worthless.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._internal.proc import find_executable, private_env, run, stage_sources, tool_version
from ..errors import ToolError
from .ast_checks import source_kind
from .interface import Analyzer, Finding, Severity

__all__ = ["BanditAnalyzer"]

_SEVERITY: dict[str, Severity] = {"LOW": "low", "MEDIUM": "medium", "HIGH": "high"}


class BanditAnalyzer(Analyzer):
    """``bandit -f json --ignore-nosec`` over the Python sources."""

    name = "bandit"

    def __init__(self, *, bin_dirs: Sequence[Path] | None = None) -> None:
        """``bin_dirs``: search only these directories for ``bandit`` (default: the venv's
        ``bin``, then ``PATH``)."""
        self._bin_dirs = bin_dirs

    def executable(self) -> str:
        return find_executable("bandit", self._bin_dirs)

    def version(self) -> str:
        return tool_version(self.executable())

    def scan(self, root: Path, paths: list[str], timeout_s: float) -> list[Finding]:
        exe = self.executable()
        py = [p for p in paths if source_kind(p) == "python"]
        if not py:
            return []
        with tempfile.TemporaryDirectory(prefix="shx-bandit-") as tmp:
            staged = stage_sources(root, py, Path(tmp) / "src", lambda rel: ".py")
            argv = [exe, "-f", "json", "--quiet", "--ignore-nosec", *sorted(staged)]
            cp = run(argv, timeout_s, env=private_env(Path(tmp), exe), cwd=Path(tmp) / "src")
        if cp.returncode not in (0, 1):
            raise ToolError(f"bandit exited {cp.returncode}: {_tail(cp.stderr)}")
        return _parse(cp.stdout, staged)


def _tail(text: str, n: int = 400) -> str:
    """The end of a tool's output, on one line (errors' ``str()`` stays one line)."""
    flat = " ".join((text or "").split())
    return flat[-n:] if flat else "(no output)"


def _parse(stdout: str, staged: dict[str, str]) -> list[Finding]:
    try:
        doc = json.loads(stdout)
        results: list[dict[str, Any]] = doc["results"]
        errors: list[dict[str, Any]] = doc.get("errors", [])
        metrics: dict[str, Any] = doc["metrics"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"bandit: unreadable JSON report ({exc}): {_tail(stdout)}") from None

    def original(name: Any) -> str:
        key = os.path.normpath(str(name))
        if key not in staged:
            raise ToolError(f"bandit reported a file it was not given: {name!r}")
        return staged[key]

    findings: list[Finding] = []
    seen = {os.path.normpath(k) for k in metrics if k != "_totals"}
    for err in errors:
        path = original(err.get("filename"))
        seen.add(os.path.normpath(str(err.get("filename"))))
        reason = str(err.get("reason", "unknown error"))
        rule = "bandit.syntax-error" if "syntax error" in reason else "bandit.scan-error"
        findings.append(Finding(tool="bandit", rule_id=rule, severity="high", path=path, line=1,
                                message=f"bandit could not analyse this file: {reason}"))
    missing = sorted(set(staged) - seen)
    if missing:
        raise ToolError("bandit skipped " + ", ".join(staged[m] for m in missing))
    for r in results:
        try:
            sev = _SEVERITY.get(str(r["issue_severity"]).upper(), "high")
            findings.append(Finding(
                tool="bandit", rule_id=f"bandit.{r['test_id']}", severity=sev,
                path=original(r["filename"]), line=int(r.get("line_number") or 1),
                message=f"{r['issue_text']} [{r.get('test_name', '?')}, confidence "
                        f"{str(r.get('issue_confidence', '?')).lower()}]"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ToolError(f"bandit: malformed result ({exc})") from None
    return findings
