"""What a policy rule returns: a violation that carries its reason code (no id lookup later)."""

from __future__ import annotations

from dataclasses import dataclass

from ..models import Reason, ReasonCode, Stage


@dataclass(frozen=True)
class Violation:
    """One broken rule. ``rule_id`` names it in findings, SARIF and messages; ``code`` is
    what the verdict says, decided by the rule that found it."""

    code: ReasonCode
    rule_id: str
    message: str
    path: str | None = None
    """The source it is about; None for a rule over the whole solution (language, size)."""
    line: int = 1

    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def reason(self) -> Reason:
        """The verdict's reason: located violations read like the static stage's findings."""
        if self.path is None:
            return Reason(code=self.code, stage=Stage.POLICY, message=self.message)
        return Reason(code=self.code, stage=Stage.POLICY,
                      message=f"policy {self.rule_id} at {self.location()}: {self.message}")
