"""The policy's rules as objects: each returns a violation that carries its own reason code.

Source checks through the files are in test_static_policy; here each rule alone, the
codes they give, and the drift that one home for the rules fixes (an unscannable entry file
was reported as a static finding because its id was missing from a table elsewhere).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandboxharness.models import Definition, Language, Policy, ReasonCode, Solution, Stage
from sandboxharness.policy import (
    AllowedImports,
    AllowedLanguages,
    BaselineLibrary,
    DeniedImports,
    FindingThreshold,
    ImportRules,
    ModuleShadowing,
    ModuleUse,
    NativeArtifact,
    ScannableEntry,
    SourceSize,
    Unreadable,
    Utf8Source,
    Violation,
    solution_violations,
    static_code,
)
from sandboxharness.stages import sources as precheck
from sandboxharness.static import AstAnalyzer, Finding, run_static


def policy(**kw: Any) -> Policy:
    return Policy.model_validate({"name": "t", **kw})


def solution(sources: dict[str, str], entry: str, language: str = "triton") -> Solution:
    return Solution.model_validate({
        "name": "cand", "definition": "rms", "author": "tests",
        "spec": {"language": language, "target_hardware": ["H100"], "entry_point": entry,
                 "destination_passing_style": True},
        "sources": [{"path": p, "content": c} for p, c in sources.items()],
    })


def use(*names: str, how: str = "imports", reference: bool = False) -> ModuleUse:
    return ModuleUse("k.py", 3, names, names[0] if reference else names[-1], how,
                     reference=reference)


KERNEL = {"kernel.py": "x = 1\n"}


def test_language_rule_and_an_empty_allow_set() -> None:
    sol = solution(KERNEL, "kernel.py::run", "cuda")
    v = AllowedLanguages.of([Language.TRITON, Language.PYTHON]).check(sol)
    assert v is not None and v.code is ReasonCode.POLICY_LANGUAGE and v.path is None
    assert v.message == "language 'cuda' is not allowed (python, triton)"
    assert AllowedLanguages.of([Language.CUDA]).check(sol) is None
    assert AllowedLanguages(frozenset()).check(sol) is not None  # an empty set allows none


@pytest.mark.parametrize(("max_sources", "max_bytes", "bad"), [(1, 6, False), (1, 5, True),
                                                                (0, 100, True)])
def test_size_rule(max_sources: int, max_bytes: int, bad: bool) -> None:
    v = SourceSize(max_sources, max_bytes).check(solution(KERNEL, "kernel.py::run"))
    assert (v is not None) is bad
    if v is not None:
        assert v.code is ReasonCode.POLICY_SOURCE_SIZE
        assert v.message == (f"1 source(s), 6 bytes; policy allows {max_sources} and "
                             f"{max_bytes} bytes")


def test_solution_rules_in_order_language_then_size() -> None:
    sol = solution(KERNEL, "kernel.py::run", "cuda")
    got = solution_violations(sol, policy(max_source_bytes=1))
    assert [v.code for v in got] == [ReasonCode.POLICY_LANGUAGE, ReasonCode.POLICY_SOURCE_SIZE]
    assert solution_violations(solution(KERNEL, "kernel.py::run"), policy()) == []


def test_import_rules_give_their_codes() -> None:
    deny = DeniedImports(("socket", "torch.utils.cpp_extension"))
    v = deny.check(use("torch.utils", "torch.utils.cpp_extension"))
    assert v is not None and v.code is ReasonCode.POLICY_IMPORT
    assert v.message == "imports torch.utils.cpp_extension (policy denies " \
                        "'torch.utils.cpp_extension')"
    assert deny.check(use("torch.utils.data")) is None
    assert deny.check(use("socketserver")) is None  # a prefix is dotted, not textual
    allow = AllowedImports(("torch",))
    assert allow.check(use("torch.nn")) is None
    v = allow.check(use("numpy"))
    assert v is not None and v.rule_id == "policy.import-not-allowed"
    assert v.code is ReasonCode.POLICY_IMPORT
    assert AllowedImports(()).check(use("torch")) is not None  # an empty allow list denies


def test_baseline_library_in_python_and_cpp() -> None:
    rule = BaselineLibrary("flashinfer", "flashinfer.norm.rmsnorm")
    v = rule.check(use("flashinfer.norm", "flashinfer.norm.rmsnorm"))
    assert v is not None and v.code is ReasonCode.POLICY_BASELINE_CALL
    assert v.message == ("imports flashinfer.norm.rmsnorm: the definition's baseline library "
                         "(fi_api flashinfer.norm.rmsnorm); the policy forbids calling it")
    assert rule.check(use("x.flashinfer.norm", how="uses", reference=True)) is not None
    assert rule.check(use("flashinfer_like")) is None
    assert rule.check_cpp_line("k.cu", 2, "#include <flashinfer/norm.cuh>") is not None
    assert rule.check_cpp_line("k.cu", 2, "int flashinfer_x = 0;") is None


def test_import_rules_from_the_policy() -> None:
    rules = ImportRules.of(policy(imports={"allow": ["torch"]}), None)
    assert rules.baseline is None and rules.allow == AllowedImports(("torch",))
    assert [v.rule_id for v in rules.check_import(use("numpy"), own=False)] == [
        "policy.import-not-allowed"]
    assert rules.check_import(use("helpers"), own=True) == []  # the candidate's own module
    assert ImportRules.of(policy(), None).allow is None  # no allow list: any import


@pytest.mark.parametrize(("rule", "code"), [
    (NativeArtifact().check("fast.so"), ReasonCode.POLICY_LANGUAGE),
    (ModuleShadowing().check("torch", "torch.py"), ReasonCode.POLICY_IMPORT),
    (ScannableEntry().check(Language.TRITON, "kernel.txt", False), ReasonCode.POLICY_LANGUAGE),
    (Utf8Source().check("bad.py", "s = '\ud800'"), ReasonCode.COMPILE_ERROR),
    (Unreadable().check("k.py", 2, "syntax"), ReasonCode.COMPILE_ERROR),
])
def test_source_rules_give_their_codes(rule: Violation | None, code: ReasonCode) -> None:
    assert rule is not None and rule.code is code and rule.rule_id.startswith("policy.")


def test_source_rules_near_misses() -> None:
    assert NativeArtifact().check("kernel.py") is None
    assert ModuleShadowing().check("helpers", "helpers.py") is None
    assert ScannableEntry().check(Language.TRITON, "kernel.py", True) is None
    assert ScannableEntry().check(Language.CUDA, "kernel.cu", False) is None
    assert Utf8Source().check("k.py", "x = 'é'") is None


def test_violation_reason_reads_like_a_finding() -> None:
    v = Violation(ReasonCode.POLICY_IMPORT, "policy.import-denied", "imports socket", "k.py", 4)
    r = v.reason()
    assert (r.code, r.stage) == (ReasonCode.POLICY_IMPORT, Stage.POLICY)
    assert r.message == "policy policy.import-denied at k.py:4: imports socket"
    assert Violation(ReasonCode.POLICY_LANGUAGE, "policy.language", "m").reason().message == "m"


def test_finding_threshold_and_codes() -> None:
    rules = policy(static={"fail_on": "medium", "ignore_rules": ["ast.env-read"]}).static
    t = FindingThreshold(rules)
    assert t.blocks(Finding("ast", "ast.concurrency", "medium", "k.py", 1, "m"))
    assert not t.blocks(Finding("ast", "ast.other", "low", "k.py", 1, "m"))
    assert not t.blocks(Finding("ast", "ast.env-read", "high", "k.py", 1, "m"))
    assert static_code(Finding("ast", "ast.syntax-error", "high", "k.py", 1, "m")) \
        is ReasonCode.COMPILE_ERROR
    assert static_code(Finding("bandit", "bandit.B602", "high", "k.py", 1, "m")) \
        is ReasonCode.STATIC_FINDING


def test_every_policy_finding_comes_with_its_violation(tmp_path: Path) -> None:
    """No rule id to look up: each policy finding of the static report is one violation."""
    sources = {"kernel.py": "import socket\nimport flashinfer\n", "torch.py": "x = 1\n",
               "fast.so": "\x7fELF", "bad.py": "s = '\ud800'\n", "odd.py": "type X = int\n"}
    report = run_static(solution(sources, "kernel.py::run"), None,
                        policy(imports={"deny": ["socket"]}), tmp_path, analyzers=[AstAnalyzer()])
    found = [f for f in report.findings if f.tool == "policy"]
    assert [(v.rule_id, v.path, v.line) for v in report.violations] == [
        (f.rule_id, f.path, f.line) for f in found]
    assert {v.rule_id for v in report.violations} == {
        "policy.import-denied", "policy.module-shadowing", "policy.native-artifact",
        "policy.invalid-source", "policy.unparsable-source"}
    assert all(f in report.blocking for f in found)
    assert not any(f.tool == "policy" for f in report.flagged)


def test_unscannable_entry_is_a_policy_violation(tmp_path: Path) -> None:
    """Regression (issue 14): ``policy.unscannable-entry`` was missing from the stage's table
    of policy rule ids, so it failed the static stage as STATIC_FINDING; it is a policy
    violation, with the code of the other can't-be-analysed rule (native artifacts)."""
    sol = solution({"kernel.txt": "import os\nos.system('id')\n"}, "kernel.txt::run")
    pol = policy(static={"bandit": False, "semgrep": False})
    definition = Definition.model_validate({
        "name": "rms", "op_type": "rmsnorm", "axes": {"b": {"type": "var"}},
        "inputs": {"x": {"shape": ["b"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["b"], "dtype": "float32"}},
        "reference": "def run(x):\n    return x\n"})
    policy_stage, static_stage = precheck.run(definition, sol, pol, tmp_path)
    assert policy_stage.status == "failed" and static_stage.status == "passed"
    assert [(r.code, r.stage) for r in policy_stage.reasons] == [
        (ReasonCode.POLICY_LANGUAGE, Stage.POLICY)]
    assert policy_stage.reasons[0].message.startswith(
        "policy policy.unscannable-entry at kernel.txt:1: a triton entry file must end in .py")
