"""The one place that finds the files the harness ships: policies, semgrep rules, seccomp.

They live in the repository's top-level ``policies/``; a wheel carries the same folder as
package data under ``sandboxharness/_shipped/policies`` (pyproject.toml maps it; nothing is
copied in git). Looked up in this order:

1. ``$SANDBOXHARNESS_POLICY_DIR`` (replaces the whole folder: default.yaml, semgrep/, seccomp/);
2. the repository checkout this package was imported from;
3. the installed package data.

A missing file is an :class:`InfrastructureError` naming it: a harness without its deny
list or its rules must stop, never fall back to an empty built-in policy.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InfrastructureError

__all__ = ["DEFAULT_POLICY", "DOCKER_SECCOMP", "POLICY_DIR_ENV", "SEMGREP_RULES",
           "policies_dir", "semgrep_rules_dir", "shipped_file"]

POLICY_DIR_ENV = "SANDBOXHARNESS_POLICY_DIR"
DEFAULT_POLICY = "default.yaml"
SEMGREP_RULES = ("semgrep/python.yaml", "semgrep/cpp.yaml")
DOCKER_SECCOMP = "seccomp/docker-worker.json"

_PKG = Path(__file__).resolve().parents[1]
_INSTALLED = _PKG / "_shipped" / "policies"


def _checkout() -> Path | None:
    """``<repo>/policies`` when this package is the one of a source checkout."""
    root = _PKG.parent
    if (root / "pyproject.toml").is_file() and (root / "policies").is_dir():
        return root / "policies"
    return None


def policies_dir() -> Path:
    """Where shipped files are looked up (existence is checked by :func:`shipped_file`)."""
    override = os.environ.get(POLICY_DIR_ENV)
    if override:
        return Path(override)
    return _checkout() or _INSTALLED


def _origin() -> str:
    if os.environ.get(POLICY_DIR_ENV):
        return f"${POLICY_DIR_ENV}"
    return "the repository checkout" if _checkout() else "the installed package"


def shipped_file(relative: str) -> Path:
    """The shipped file ``relative`` (e.g. ``"default.yaml"``); raises if it is absent."""
    path = policies_dir() / relative
    if not path.is_file():
        raise InfrastructureError(
            f"shipped file missing: {path} (policies from {_origin()}; reinstall the package "
            f"or point ${POLICY_DIR_ENV} at a complete policies folder)")
    return path


def semgrep_rules_dir() -> Path:
    """The semgrep rules folder, every shipped rule set in it (Python and C++/CUDA)."""
    for rel in SEMGREP_RULES:
        shipped_file(rel)
    return policies_dir() / "semgrep"
