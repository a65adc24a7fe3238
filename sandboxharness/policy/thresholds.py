"""Which analyser findings reject a candidate, and with which reason code.

Policy violations always reject (a policy owner cannot waive their own policy with
``ignore_rules``); an analyser's finding rejects at or above ``fail_on`` unless ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, get_args

from ..models import ReasonCode
from ..models.policy import Severity, StaticRules

__all__ = ["FindingThreshold", "Rated", "static_code"]

# low < medium < high, in the order the policy model declares them
_RANK = {name: i for i, name in enumerate(get_args(Severity), start=1)}
# An analyser's "this does not parse" is the code a failed import would give.
_STATIC_CODES = {"ast.syntax-error": ReasonCode.COMPILE_ERROR,
                 "bandit.syntax-error": ReasonCode.COMPILE_ERROR}


class Rated(Protocol):
    """An analyser's finding, as far as the threshold is concerned."""

    @property
    def rule_id(self) -> str: ...
    @property
    def severity(self) -> str: ...


@dataclass(frozen=True)
class FindingThreshold:
    rules: StaticRules

    def blocks(self, finding: Rated) -> bool:
        if finding.rule_id in self.rules.ignore_rules:
            return False
        return _RANK[finding.severity] >= _RANK[self.rules.fail_on]


def static_code(finding: Rated) -> ReasonCode:
    """The reason code of a blocking analyser finding."""
    return _STATIC_CODES.get(finding.rule_id, ReasonCode.STATIC_FINDING)
