"""Rules over the whole solution, judged before any source is written or analysed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from ..models import Language, Policy, ReasonCode, Solution
from .violation import Violation

__all__ = ["AllowedLanguages", "SourceSize", "solution_violations"]


@dataclass(frozen=True)
class AllowedLanguages:
    """The solution's language must be in ``allowed``; an empty set allows none."""

    allowed: frozenset[Language]
    rule_id: ClassVar[str] = "policy.language"
    code: ClassVar[ReasonCode] = ReasonCode.POLICY_LANGUAGE

    @classmethod
    def of(cls, languages: Iterable[Language]) -> AllowedLanguages:
        return cls(frozenset(languages))

    def check(self, solution: Solution) -> Violation | None:
        lang = solution.spec.language
        if lang in self.allowed:
            return None
        allowed = ", ".join(sorted(x.value for x in self.allowed))
        return Violation(self.code, self.rule_id,
                         f"language {lang.value!r} is not allowed ({allowed})")


@dataclass(frozen=True)
class SourceSize:
    """At most ``max_sources`` files and ``max_bytes`` bytes (UTF-8) in all."""

    max_sources: int
    max_bytes: int
    rule_id: ClassVar[str] = "policy.source-size"
    code: ClassVar[ReasonCode] = ReasonCode.POLICY_SOURCE_SIZE

    def check(self, solution: Solution) -> Violation | None:
        total = sum(len(s.content.encode()) for s in solution.sources)
        count = len(solution.sources)
        if total <= self.max_bytes and count <= self.max_sources:
            return None
        return Violation(self.code, self.rule_id,
                         f"{count} source(s), {total} bytes; policy allows {self.max_sources} "
                         f"and {self.max_bytes} bytes")


def solution_violations(solution: Solution, policy: Policy) -> list[Violation]:
    """Language, then size: what rejects a solution before its sources are looked at."""
    rules = (AllowedLanguages.of(policy.languages),
             SourceSize(policy.max_sources, policy.max_source_bytes))
    return [v for rule in rules if (v := rule.check(solution)) is not None]
