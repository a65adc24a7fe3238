"""The static-analysis layer: analysers read sources, never run them."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Severity = Literal["low", "medium", "high"]
SEVERITY_RANK: dict[str, int] = {"low": 1, "medium": 2, "high": 3}


@dataclass(frozen=True)
class Finding:
    tool: str
    """``bandit``, ``semgrep``, ``ast`` or ``policy``."""
    rule_id: str
    severity: Severity
    path: str
    """Source path as given in the solution."""
    line: int
    message: str

    def location(self) -> str:
        return f"{self.path}:{self.line}"


class Analyzer(abc.ABC):
    name: str

    @abc.abstractmethod
    def scan(self, root: Path, paths: list[str], timeout_s: float) -> list[Finding]:
        """Scan ``paths`` (relative to ``root``, already written there by the caller).

        Raises :class:`sandboxharness.errors.ToolError` when the tool itself fails; a candidate's
        code can only produce findings, never an exception.
        """

    def version(self) -> str:
        return "unknown"
