"""The project's kernel corpus (kernels/) through the static stage.

* every honest solution passes: no blocking finding under the default policy (AST rules and
  policy checks per solution; bandit and semgrep once over all honest sources together);
* every forbidden solution, and every red-team case that the static or policy stage is meant
  to catch, is blocked before anything runs.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from sandboxharness.intake import load_definition, load_policy, load_solution
from sandboxharness.models import Definition, Policy, Solution
from sandboxharness.static import (
    SEVERITY_RANK,
    Analyzer,
    BanditAnalyzer,
    SemgrepAnalyzer,
    StaticReport,
    analyzers_for,
    run_static,
    scan_files,
)

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "kernels"
CORPUS_TOML = KERNELS / "src" / "corpus.toml"
GPU_MANIFEST = KERNELS / "gpu" / "manifest.json"
REDTEAM_MANIFEST = KERNELS / "redteam" / "manifest.json"

pytestmark = pytest.mark.skipif(not CORPUS_TOML.exists(), reason="kernels/ corpus not present")


def _solutions(kind: str) -> list[Path]:
    out = []
    if CORPUS_TOML.exists():
        for s in tomllib.loads(CORPUS_TOML.read_text()).get("solution", []):
            if s.get("kind") == kind:
                stem = Path(s["src"]).stem
                out.append(KERNELS / "solutions" / s["definition"] / f"{stem}.json")
    if kind == "honest" and GPU_MANIFEST.exists():
        for c in json.loads(GPU_MANIFEST.read_text())["cases"]:
            if c.get("kind") == "honest":
                out.append(KERNELS / "gpu" / c["solution"])
    return sorted(p for p in out if p.exists())


def _redteam_static() -> list[dict[str, object]]:
    if not REDTEAM_MANIFEST.exists():
        return []
    return [c for c in json.loads(REDTEAM_MANIFEST.read_text())["cases"]
            if c.get("caught_by") in ("static", "policy")]


def _definition_for(sol: Solution, near: Path) -> Definition | None:
    for d in (near.parent.parent / "definitions", near.parent.parent.parent / "definitions"):
        if (d / f"{sol.definition}.json").exists():
            return load_definition(d / f"{sol.definition}.json")
    return None


@pytest.fixture(scope="module")
def default_policy() -> Policy:
    return load_policy(REPO / "policies" / "default.yaml")


def _fast(sol: Solution, policy: Policy) -> list[Analyzer]:
    """AST rules and policy checks only (no subprocess)."""
    no_tools = policy.static.model_copy(update={"bandit": False, "semgrep": False})
    return analyzers_for(no_tools, sol.spec.language)


HONEST = _solutions("honest")


@pytest.mark.parametrize("path", HONEST, ids=lambda p: str(p.relative_to(KERNELS)))
def test_honest_corpus_solution_is_not_blocked(path: Path, default_policy: Policy,
                                               tmp_path: Path) -> None:
    sol = load_solution(path)
    report = run_static(sol, _definition_for(sol, path), default_policy, tmp_path,
                        analyzers=_fast(sol, default_policy))
    assert report.blocking == []


def test_honest_corpus_sources_clean_for_bandit_and_semgrep(tmp_path: Path) -> None:
    """One call per tool over every honest source (a tool's start-up is paid once)."""
    if not HONEST:
        pytest.skip("no honest solutions in the corpus")
    paths = []
    for i, path in enumerate(HONEST):
        for src in load_solution(path).sources:
            rel = f"s{i:02d}/{src.path}"
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(src.content)
            paths.append(rel)
    findings, _, _ = scan_files(tmp_path, paths, [BanditAnalyzer(), SemgrepAnalyzer()], 120.0)
    assert [f for f in findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["medium"]] == []


def _blocked(path: Path, policy: Policy, tmp_path: Path) -> StaticReport:
    sol = load_solution(path)
    d = _definition_for(sol, path)
    report = run_static(sol, d, policy, tmp_path / "fast", analyzers=_fast(sol, policy))
    if not report.blocking:  # only bandit/semgrep may see it: run everything
        report = run_static(sol, d, policy, tmp_path / "full")
    return report


@pytest.mark.parametrize("path", _solutions("forbidden"),
                         ids=lambda p: str(p.relative_to(KERNELS)))
def test_forbidden_corpus_solution_is_blocked(path: Path, default_policy: Policy,
                                              tmp_path: Path) -> None:
    assert _blocked(path, default_policy, tmp_path).blocking


@pytest.mark.parametrize("case", _redteam_static(), ids=lambda c: str(c["id"]))
def test_redteam_static_case_is_blocked(case: dict[str, object], default_policy: Policy,
                                        tmp_path: Path) -> None:
    """Each red-team case designed to be caught before running is caught statically."""
    policy = default_policy
    overrides = case.get("policy")
    if isinstance(overrides, dict):
        policy = Policy.model_validate({**default_policy.model_dump(), **overrides})
    report = _blocked(KERNELS / "redteam" / str(case["solution"]), policy, tmp_path)
    assert report.blocking, f"{case['id']}: {case.get('attack')}"
