"""Findings as SARIF 2.1.0, for code-scanning tools (``sandboxharness scan --sarif``).

One run per tool (``ast``, ``bandit``, ``semgrep``, ``policy``), each with the rules its
results use. Severity maps to SARIF levels: high -> error, medium -> warning, low -> note;
the harness's own severity is kept in ``properties``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from .ast_checks import RULES as AST_RULES
from .interface import Finding

__all__ = ["SARIF_SCHEMA", "SARIF_VERSION", "to_sarif"]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"high": "error", "medium": "warning", "low": "note"}
_TOOL_URI = {
    "bandit": "https://bandit.readthedocs.io/",
    "semgrep": "https://semgrep.dev/",
}


def to_sarif(findings: Sequence[Finding],
             tool_versions: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A SARIF 2.1.0 log (a JSON-ready dict) with one run per tool that reported."""
    versions = tool_versions or {}
    by_tool: dict[str, list[Finding]] = {}
    for f in findings:
        by_tool.setdefault(f.tool, []).append(f)
    runs = [_run(tool, by_tool[tool], versions.get(tool)) for tool in sorted(by_tool)]
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": runs}


def _run(tool: str, findings: list[Finding], version: str | None) -> dict[str, Any]:
    rule_index: dict[str, int] = {}
    rules: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for f in findings:
        if f.rule_id not in rule_index:
            rule_index[f.rule_id] = len(rules)
            known = AST_RULES.get(f.rule_id)
            rules.append({
                "id": f.rule_id,
                "shortDescription": {"text": known.summary if known else f.rule_id},
                "defaultConfiguration": {"level": _LEVEL[f.severity]},
                "properties": {"severity": f.severity},
            })
        results.append({
            "ruleId": f.rule_id,
            "ruleIndex": rule_index[f.rule_id],
            "level": _LEVEL[f.severity],
            "message": {"text": f.message or f.rule_id},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": quote(f.path), "uriBaseId": "SRCROOT"},
                "region": {"startLine": max(1, f.line)},
            }}],
            "properties": {"severity": f.severity, "tool": f.tool},
        })
    driver: dict[str, Any] = {"name": tool if tool != "ast" else "sandboxharness-ast",
                              "rules": rules}
    if version:
        driver["version"] = version
    if tool in _TOOL_URI:
        driver["informationUri"] = _TOOL_URI[tool]
    return {"tool": {"driver": driver}, "results": results,
            "columnKind": "unicodeCodePoints"}
