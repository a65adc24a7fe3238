"""Import rules: what modules a source may reach, and the definition's baseline library.

The static layer finds every way a source reaches a module (``ModuleUse``: an import, a
dynamic import folded from constants, a reference through an imported name, an include in
C++) and asks these rules. Names are dotted prefixes: ``torch.utils.cpp_extension`` covers
its submodules and attributes too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ..models import Definition, Policy, ReasonCode
from .violation import Violation

__all__ = ["AllowedImports", "BaselineLibrary", "DeniedImports", "ImportRules", "ModuleUse",
           "matches_prefix"]


def matches_prefix(name: str, prefixes: Iterable[str]) -> str | None:
    """The first of ``prefixes`` that ``name`` equals or lies under (dotted), else ``None``."""
    for p in prefixes:
        if name == p or name.startswith(p + "."):
            return p
    return None


@dataclass(frozen=True)
class ModuleUse:
    """One place where a source reaches modules."""

    path: str
    line: int
    names: tuple[str, ...]
    """Every dotted name it reaches: the module, ``module.name`` for ``from`` imports, and any
    module reached as an attribute of those (``from torch import os`` reaches ``os``)."""
    shown: str
    """The name the message shows."""
    how: str
    """How the message says it: ``imports``, ``imports dynamically``, ``uses``."""
    reference: bool = False
    """Reached through a name in the code, not by an import statement."""


@dataclass(frozen=True)
class DeniedImports:
    """No module under a ``deny`` prefix, by import or by reference."""

    deny: tuple[str, ...]
    rule_id: ClassVar[str] = "policy.import-denied"
    code: ClassVar[ReasonCode] = ReasonCode.POLICY_IMPORT

    def check(self, use: ModuleUse) -> Violation | None:
        hit = next((d for c in use.names if (d := matches_prefix(c, self.deny))), None)
        if hit is None:
            return None
        return Violation(self.code, self.rule_id, f"{use.how} {use.shown} (policy denies "
                         f"{hit!r})", use.path, use.line)


@dataclass(frozen=True)
class AllowedImports:
    """Only imports under an ``allow`` prefix; an empty allow list allows none."""

    allow: tuple[str, ...]
    rule_id: ClassVar[str] = "policy.import-not-allowed"
    code: ClassVar[ReasonCode] = ReasonCode.POLICY_IMPORT

    def check(self, use: ModuleUse) -> Violation | None:
        if any(matches_prefix(c, self.allow) for c in use.names):
            return None
        return Violation(self.code, self.rule_id,
                         f"{use.how} {use.shown}: not in the policy's allow list",
                         use.path, use.line)


@dataclass(frozen=True)
class BaselineLibrary:
    """No use of the top-level package of the definition's ``fi_api`` (the library the
    candidate is compared against), in Python or in C++/CUDA."""

    package: str
    fi_api: str | None
    rule_id: ClassVar[str] = "policy.baseline-call"
    code: ClassVar[ReasonCode] = ReasonCode.POLICY_BASELINE_CALL

    def check(self, use: ModuleUse) -> Violation | None:
        if use.reference:  # any component: ``fi.flashinfer.norm`` through an alias too
            hit = self.package in use.shown.split(".")
        else:
            hit = any(matches_prefix(c, [self.package]) for c in use.names)
        if not hit:
            return None
        return self._violation(f"{use.how} {use.names[-1]}", use.path, use.line)

    def check_cpp_line(self, path: str, lineno: int, text: str) -> Violation | None:
        """An ``#include <pkg/...>`` or a ``pkg::`` name on one line of C++/CUDA."""
        pkg = re.escape(self.package)
        if not re.search(rf"#\s*include\s*[<\"]\s*{pkg}[/.]|\b{pkg}::", text):
            return None
        return self._violation(f"uses {self.package} from C++", path, lineno)

    def _violation(self, what: str, path: str, line: int) -> Violation:
        return Violation(self.code, self.rule_id,
                         f"{what}: the definition's baseline library (fi_api {self.fi_api}); "
                         "the policy forbids calling it", path, line)


@dataclass(frozen=True)
class ImportRules:
    """The import rules one policy sets for one definition."""

    deny: DeniedImports
    allow: AllowedImports | None
    baseline: BaselineLibrary | None

    @classmethod
    def of(cls, policy: Policy, definition: Definition | None) -> ImportRules:
        allow = policy.imports.allow
        baseline = None
        if policy.forbid_baseline_library and definition is not None and definition.fi_api:
            baseline = BaselineLibrary(definition.fi_api.split(".")[0], definition.fi_api)
        return cls(deny=DeniedImports(tuple(policy.imports.deny)),
                   allow=AllowedImports(tuple(allow)) if allow is not None else None,
                   baseline=baseline)

    def check_import(self, use: ModuleUse, own: bool) -> list[Violation]:
        """An import statement (or dynamic import): baseline, then deny, else allow.
        ``own``: the candidate's own module or ``__future__``, outside deny and allow."""
        out = [v for v in [self.baseline.check(use) if self.baseline else None] if v]
        if own:
            return out
        denied = self.deny.check(use)
        if denied is not None:
            out.append(denied)
        elif self.allow is not None and (v := self.allow.check(use)) is not None:
            out.append(v)
        return out

    def check_reference(self, use: ModuleUse) -> Sequence[Violation | None]:
        """A reference through an imported name: (deny, baseline), each possibly None."""
        return (self.deny.check(use), self.baseline.check(use) if self.baseline else None)
