"""The static stage end to end: sources written privately, real analysers, blocking rules, SARIF."""

from __future__ import annotations

import dataclasses
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from sandboxharness.errors import ToolError
from sandboxharness.intake import load_policy
from sandboxharness.models import Definition, Language, Policy, ReasonCode, Solution
from sandboxharness.static import (
    AstAnalyzer,
    BanditAnalyzer,
    Finding,
    SemgrepAnalyzer,
    StaticReport,
    analyzers_for,
    run_static,
    scan_files,
    to_sarif,
)

REPO = Path(__file__).resolve().parents[2]
HONEST = REPO / "tests" / "data" / "static" / "honest"


def solution(sources: dict[str, str], entry: str, language: str = "triton",
             dps: bool = True) -> Solution:
    return Solution.model_validate({
        "name": "cand", "definition": "rms", "author": "tests",
        "spec": {"language": language, "target_hardware": ["H100"], "entry_point": entry,
                 "destination_passing_style": dps},
        "sources": [{"path": p, "content": c} for p, c in sources.items()],
    })


def honest(*names: str, rename: dict[str, str] | None = None) -> dict[str, str]:
    rename = rename or {}
    return {rename.get(n, n): (HONEST / n).read_text() for n in names}


def definition() -> Definition:
    return Definition.model_validate({
        "name": "rms", "op_type": "rmsnorm", "axes": {"b": {"type": "var"}},
        "inputs": {"x": {"shape": ["b"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["b"], "dtype": "float32"}},
        "reference": "def run(x):\n    return x\n", "tags": ["fi_api:flashinfer.norm.rmsnorm"],
    })


def policy(**kw: Any) -> Policy:
    return Policy.model_validate({"name": "t", **kw})


@pytest.fixture(scope="module")
def default_policy() -> Policy:
    return load_policy(REPO / "policies" / "default.yaml")


HONEST_SOLUTIONS = {
    "triton-dps": (honest("triton_rmsnorm_dps.py", rename={"triton_rmsnorm_dps.py": "kernel.py"}),
                   "kernel.py::run", "triton", True),
    "triton-returning": (honest("triton_softmax_returning.py"),
                         "triton_softmax_returning.py::run", "triton", False),
    "triton-multi-file": (honest("triton_multifile_kernel.py", "triton_multifile_helpers.py"),
                          "triton_multifile_kernel.py::run", "triton", True),
    "plain-torch": (honest("plain_torch.py"), "plain_torch.py::run", "python", False),
    "cuda": (honest("cuda_add_kernel.cu", "cuda_helpers.cuh"), "cuda_add_kernel.cu::run",
             "cuda", True),
}


@pytest.mark.parametrize("name", sorted(HONEST_SOLUTIONS))
def test_honest_solutions_pass_the_default_policy(name: str, default_policy: Policy,
                                                  tmp_path: Path) -> None:
    """No false positives: honest kernels pass the default policy's import checks and the
    AST rules without a single finding (bandit and semgrep see the same files in one batch
    in test_static_tools, and two solutions below go through every tool)."""
    sources, entry, language, dps = HONEST_SOLUTIONS[name]
    sol = solution(sources, entry, language, dps)
    report = run_static(sol, definition(), default_policy, tmp_path,
                        analyzers=analyzers_for(policy(static={"bandit": False,
                                                               "semgrep": False}).static,
                                                sol.spec.language))
    assert report.findings == []
    assert report.passed


@pytest.mark.parametrize("name", ["triton-dps", "cuda"])
def test_honest_solutions_pass_with_every_tool(name: str, default_policy: Policy,
                                               tmp_path: Path) -> None:
    """The same, end to end with real bandit and semgrep."""
    sources, entry, language, dps = HONEST_SOLUTIONS[name]
    report = run_static(solution(sources, entry, language, dps), definition(), default_policy,
                        tmp_path)
    assert report.blocking == [], report.blocking
    assert set(report.tools) == {"ast", "bandit", "semgrep"}
    assert {"policy", "ast", "bandit", "semgrep"} <= set(report.durations)


ATTACK = {
    "kernel.py": (
        "import torch\n"
        "import helpers\n"
        "\n"
        "def run(x, y):\n"
        "    try:\n"
        "        y.copy_(helpers.fast(x))\n"
        "    except Exception:\n"
        "        y.copy_(torch.relu(x))\n"
    ),
    "helpers.py": (
        "import time as clock  # nosec\n"
        "import flashinfer\n"
        "\n"
        "clock.perf_counter = lambda: 0.0  # nosemgrep\n"
        "\n"
        "def fast(x):\n"
        "    return flashinfer.norm.rmsnorm(x)\n"
    ),
    "ext.cu": '#include <cstdlib>\nvoid f() { system("id"); }\n',
}


@pytest.fixture(scope="module")
def attack_report(tmp_path_factory: pytest.TempPathFactory,
                  default_policy: Policy) -> StaticReport:
    return run_static(solution(ATTACK, "kernel.py::run"), definition(), default_policy,
                      tmp_path_factory.mktemp("attack"))


def ids(findings: list[Finding]) -> set[tuple[str, str, int]]:
    return {(f.rule_id, f.path, f.line) for f in findings}


def test_attack_is_blocked_with_located_findings(attack_report: StaticReport) -> None:
    """Attack: timer patch behind an alias + nosemgrep, baseline call, torch fallback, and a
    .cu file shelling out - in a multi-file solution."""
    blocking = ids(attack_report.blocking)
    assert ("ast.monkeypatch", "helpers.py", 4) in blocking
    assert ("semgrep.py-timer-or-check-patch", "helpers.py", 4) in blocking
    assert ("policy.baseline-call", "helpers.py", 2) in blocking
    assert ("ast.swallowed-exception", "kernel.py", 7) in blocking
    assert ("semgrep.cpp-process-spawn", "ext.cu", 2) in blocking
    assert not attack_report.passed
    # blocking holds the very objects of findings (the CLI relies on identity)
    assert all(any(b is f for f in attack_report.findings) for b in attack_report.blocking)
    keys = [(f.path, f.line, f.tool, f.rule_id, f.message) for f in attack_report.findings]
    assert keys == sorted(keys)


def test_report_is_frozen(attack_report: StaticReport) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        attack_report.blocking = []  # type: ignore[misc]


SMALL = {"kernel.py": ("import os\nimport threading\n\ndef run(x):\n    v = os.getenv('X')\n"
                       "    threading.Thread(target=print).start()\n")}


def ast_only(pol: Policy, tmp_path: Path, sources: dict[str, str] = SMALL) -> StaticReport:
    return run_static(solution(sources, "kernel.py::run"), None, pol, tmp_path,
                      analyzers=[AstAnalyzer()])


def test_fail_on_threshold(tmp_path: Path) -> None:
    medium = ids(ast_only(policy(static={"fail_on": "medium"}), tmp_path / "a").blocking)
    high = ids(ast_only(policy(static={"fail_on": "high"}), tmp_path / "b").blocking)
    assert ("ast.env-read", "kernel.py", 5) in medium - high
    assert ("ast.concurrency", "kernel.py", 6) in medium & high


def test_ignore_rules_but_policy_findings_always_block(tmp_path: Path) -> None:
    pol = policy(imports={"deny": ["threading"]},
                 static={"ignore_rules": ["ast.concurrency", "policy.import-denied"]})
    report = ast_only(pol, tmp_path)
    blocking = ids(report.blocking)
    assert not any(r == "ast.concurrency" for r, _, _ in blocking)
    assert ("ast.concurrency", "kernel.py", 6) in ids(report.findings)
    assert ("policy.import-denied", "kernel.py", 2) in blocking


def test_sources_go_to_a_fresh_private_directory(tmp_path: Path) -> None:
    sol = solution({"kernel.py": "x = 1\n", "pkg/deep/mod.py": "y = 2\n"}, "kernel.py::run")
    for _ in range(2):  # the same workdir twice: each run gets its own directory
        run_static(sol, None, policy(), tmp_path, analyzers=[])
    dirs = sorted(tmp_path.iterdir())
    assert len(dirs) == 2
    for d in dirs:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
        assert (d / "pkg" / "deep" / "mod.py").read_text() == "y = 2\n"


def test_unencodable_source_is_a_policy_finding(tmp_path: Path) -> None:
    sol = solution({"kernel.py": "x = 1\n", "bad.py": "s = '\ud800'\n"}, "kernel.py::run")
    report = run_static(sol, None, policy(), tmp_path, analyzers=[AstAnalyzer()])
    assert ("policy.invalid-source", "bad.py", 1) in ids(report.blocking)


def test_python_entry_must_be_a_py_file(tmp_path: Path) -> None:
    """Attack: an entry file named kernel.txt would be loaded as Python but scanned as text."""
    sol = solution({"kernel.txt": "import os\nos.system('id')\n"}, "kernel.txt::run")
    report = run_static(sol, None, policy(), tmp_path, analyzers=[AstAnalyzer()])
    assert ("policy.unscannable-entry", "kernel.txt", 1) in ids(report.blocking)
    assert [v.code for v in report.violations] == [ReasonCode.POLICY_LANGUAGE]  # not STATIC_*


@pytest.mark.parametrize("language, blocked", [("triton", True), ("python", False)])
def test_torch_compute_depends_on_the_language(language: str, blocked: bool,
                                               tmp_path: Path) -> None:
    """Attack: a decoy Triton kernel with torch doing the real work."""
    src = {"kernel.py": "import torch\ndef run(x, y):\n    y.copy_(torch.relu(x))\n"}
    report = run_static(solution(src, "kernel.py::run", language), None, policy(), tmp_path,
                        analyzers=analyzers_for(policy(static={"bandit": False,
                                                               "semgrep": False}).static,
                                                Language(language)))
    assert (("ast.torch-compute", "kernel.py", 3) in ids(report.blocking)) is blocked


def test_analyzers_follow_the_policy() -> None:
    names = [a.name for a in analyzers_for(policy(static={"bandit": False}).static)]
    assert names == ["ast", "semgrep"]
    assert [type(a) for a in analyzers_for(policy().static)] == [AstAnalyzer, BanditAnalyzer,
                                                                  SemgrepAnalyzer]
    assert analyzers_for(policy(static={"ast_rules": False, "bandit": False,
                                        "semgrep": False}).static) == []


def test_budget_exhaustion_is_a_tool_error(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text("x = 1\n")
    with pytest.raises(ToolError, match="budget"):
        scan_files(tmp_path, ["k.py"], [AstAnalyzer(), BanditAnalyzer()], 1e-9)


# --- SARIF ---------------------------------------------------------------------------------

def test_sarif_log(attack_report: StaticReport) -> None:
    log = to_sarif(attack_report.findings, attack_report.tools)
    json.dumps(log)  # JSON-ready
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    runs = {r["tool"]["driver"]["name"]: r for r in log["runs"]}
    assert {"sandboxharness-ast", "semgrep", "policy"} <= set(runs)
    assert runs["semgrep"]["tool"]["driver"]["version"] == attack_report.tools["semgrep"]
    total = 0
    for run in log["runs"]:
        rules = run["tool"]["driver"]["rules"]
        for res in run["results"]:
            assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
            assert res["level"] in ("error", "warning", "note")
            loc = res["locations"][0]["physicalLocation"]
            assert loc["region"]["startLine"] >= 1 and loc["artifactLocation"]["uri"]
            total += 1
    assert total == len(attack_report.findings)


def test_sarif_levels_and_uris() -> None:
    findings = [Finding("ast", "ast.env-read", "medium", "dir with space/k.py", 3, "m"),
                Finding("semgrep", "semgrep.cpp-process-exit", "low", "k.cu", 0, "m")]
    log = to_sarif(findings)
    res = [r for run in log["runs"] for r in run["results"]]
    assert [r["level"] for r in res] == ["warning", "note"]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in res]
    assert uris == ["dir%20with%20space/k.py", "k.cu"]
    assert res[1]["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    assert to_sarif([])["runs"] == []
