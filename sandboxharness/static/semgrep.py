"""semgrep adapter: our local rules only, offline, suppressions ignored.

* Rules come from ``policies/semgrep`` (``$SANDBOXHARNESS_POLICY_DIR/semgrep`` overrides);
  registry rulesets are never fetched (``--metrics=off --disable-version-check``).
* ``--disable-nosem``: a candidate's ``# nosemgrep`` comment hides nothing.
* semgrep does not map ``.cu``/``.cuh`` to C++ and skips them silently in a directory scan:
  every file is passed explicitly, staged under a name whose suffix gives its language
  (``.py`` or ``.cpp``), with ``--scan-unknown-extensions`` as a second guard.
* Settings, log, caches and HOME go to a private temporary directory.
* Every staged file must be in the report's ``paths.scanned``; a file semgrep skipped is a
  :class:`ToolError`, never a clean result. A file it could not parse at all, or gave up
  on (timeout, memory), becomes a blocking finding: the candidate cannot hide code that way.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._internal.proc import find_executable, private_env, run, stage_sources, tool_version
from .._internal.shipped import POLICY_DIR_ENV, semgrep_rules_dir
from ..errors import ToolError
from .ast_checks import source_kind
from .interface import Analyzer, Finding, Severity

__all__ = ["POLICY_DIR_ENV", "SemgrepAnalyzer", "default_rules_dir"]

_SEVERITY: dict[str, Severity] = {
    "INFO": "low", "LOW": "low", "WARNING": "medium", "MEDIUM": "medium", "ERROR": "high",
    "HIGH": "high", "CRITICAL": "high",
}
# Without these, semgrep looks for a newer version online (~99 s where there is no network).
_OFFLINE = {"SEMGREP_SEND_METRICS": "off", "SEMGREP_ENABLE_VERSION_CHECK": "0"}
_PARSE_ERRORS = {"Syntax error", "Lexical error", "Other syntax error", "AST builder error"}
_INCOMPLETE = {"Timeout", "OutOfMemory", "Out of memory", "Stack overflow",
               "StackOverflow", "Fatal error", "FatalError"}


def default_rules_dir() -> Path:
    """The shipped ``semgrep/`` folder; InfrastructureError if a rule set is missing."""
    return semgrep_rules_dir()


class SemgrepAnalyzer(Analyzer):
    """``semgrep scan --config <rules>`` over the Python and C++/CUDA sources, in one call."""

    name = "semgrep"

    def __init__(self, *, rules_dir: Path | None = None,
                 bin_dirs: Sequence[Path] | None = None) -> None:
        self.rules_dir = rules_dir if rules_dir is not None else default_rules_dir()
        self._bin_dirs = bin_dirs
        self._version: str | None = None

    def executable(self) -> str:
        return find_executable("semgrep", self._bin_dirs)

    def version(self) -> str:
        if self._version is None:
            self._version = tool_version(self.executable(), extra_env=_OFFLINE)
        return self._version

    def _rules(self) -> Path:
        rules = self.rules_dir.resolve()
        if not any(p.is_file() for p in rules.glob("*.y*ml")):
            raise ToolError(f"semgrep: no rule files (*.yaml) in {rules}")
        return rules

    def scan(self, root: Path, paths: list[str], timeout_s: float) -> list[Finding]:
        exe = self.executable()
        rules = self._rules()
        targets = [p for p in paths if source_kind(p) in ("python", "cpp")]
        if not targets:
            return []
        with tempfile.TemporaryDirectory(prefix="shx-semgrep-") as tmp_name:
            tmp = Path(tmp_name)
            staged = stage_sources(root, targets, tmp / "src",
                                   lambda rel: ".py" if source_kind(rel) == "python" else ".cpp")
            env = private_env(tmp, exe) | _OFFLINE | {
                "SEMGREP_SETTINGS_FILE": str(tmp / "settings.yml"),
                "SEMGREP_LOG_FILE": str(tmp / "semgrep.log"),
            }
            argv = [exe, "scan", "--metrics=off", "--disable-version-check", "--disable-nosem",
                    "--json", "--quiet", "--scan-unknown-extensions", "--no-git-ignore",
                    "--max-target-bytes=0", "--config", str(rules),
                    *(f"./{name}" for name in sorted(staged))]
            cp = run(argv, timeout_s, env=env, cwd=tmp / "src")
        findings, version = _parse(cp.stdout, cp.returncode, cp.stderr, staged)
        if version:
            self._version = version
        return findings


def _tail(text: str, n: int = 600) -> str:
    """The end of a tool's output, on one line (errors' ``str()`` stays one line)."""
    flat = " ".join((text or "").split())
    return flat[-n:] if flat else "(no output)"


def _error_type(err: dict[str, Any]) -> str:
    t = err.get("type")
    if isinstance(t, list) and t:
        return str(t[0])
    return str(t)


def _parse(stdout: str, rc: int, stderr: str,
           staged: dict[str, str]) -> tuple[list[Finding], str | None]:
    try:
        doc = json.loads(stdout)
        results: list[dict[str, Any]] = doc["results"]
        errors: list[dict[str, Any]] = doc.get("errors", [])
        scanned = {os.path.normpath(str(p)) for p in doc.get("paths", {}).get("scanned", [])}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ToolError(f"semgrep exited {rc} with an unreadable report ({exc}): "
                        f"{_tail(stderr)}") from None

    def original(name: Any) -> str | None:
        return staged.get(os.path.normpath(str(name))) if name else None

    findings: list[Finding] = []
    for err in errors:
        etype = _error_type(err)
        path = original(err.get("path"))
        if path is None:  # not about one of our files: rules, config, the engine itself
            raise ToolError(f"semgrep failed ({etype}): {_tail(str(err.get('message')))}")
        if etype == "PartialParsing":
            continue  # rules still ran on the parts that parsed
        if etype in _PARSE_ERRORS:
            findings.append(Finding(
                tool="semgrep", rule_id="semgrep.unparsed-source", severity="high", path=path,
                line=_line(err), message=f"semgrep could not parse this file ({etype}); its "
                "rules did not run on it"))
        elif etype in _INCOMPLETE or err.get("level") == "error":
            findings.append(Finding(
                tool="semgrep", rule_id="semgrep.incomplete-scan", severity="high", path=path,
                line=_line(err), message=f"semgrep gave up on this file ({etype}); the scan "
                "is incomplete"))
    missing = sorted(set(staged) - scanned)
    if missing:
        raise ToolError("semgrep skipped " + ", ".join(staged[m] for m in missing))
    if rc not in (0, 1) and not findings:
        raise ToolError(f"semgrep exited {rc}: {_tail(stderr)}")
    for r in results:
        try:
            extra = r["extra"]
            sev = _SEVERITY.get(str(extra["severity"]).upper())
            if sev is None:
                raise ToolError(f"semgrep: unknown severity {extra['severity']!r}")
            path = original(r["path"])
            if path is None:
                raise ToolError(f"semgrep reported a file it was not given: {r['path']!r}")
            rule = str(r["check_id"]).rsplit(".", 1)[-1]
            findings.append(Finding(tool="semgrep", rule_id=f"semgrep.{rule}", severity=sev,
                                    path=path, line=int(r["start"]["line"]),
                                    message=" ".join(str(extra.get("message", "")).split())))
        except (KeyError, TypeError, ValueError) as exc:
            raise ToolError(f"semgrep: malformed result ({exc})") from None
    version = doc.get("version")
    return findings, str(version).strip() if version else None


def _line(err: dict[str, Any]) -> int:
    for span in err.get("spans") or []:
        try:
            return int(span["start"]["line"])
        except (KeyError, TypeError, ValueError):
            continue
    return 1
