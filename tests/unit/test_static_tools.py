"""bandit and semgrep, for real: one scan per tool over the whole corpus (semgrep start-up
costs ~2 s a call), then one assertion per attack.

Corpus markers (tests/data/static/corpus/README.md): ``expect: <semgrep ids>`` must be
exactly what semgrep reports on that line; ``bandit: <ids>`` must be among bandit's findings.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from sandboxharness.errors import ToolError
from sandboxharness.static import (
    SEVERITY_RANK,
    AstAnalyzer,
    BanditAnalyzer,
    Finding,
    SemgrepAnalyzer,
    default_rules_dir,
)
from sandboxharness.static.semgrep import POLICY_DIR_ENV

DATA = Path(__file__).resolve().parents[1] / "data" / "static"
CORPUS = DATA / "corpus"
HONEST = DATA / "honest"
RULES_DIR = Path(__file__).resolve().parents[2] / "policies" / "semgrep"

# Places bandit or semgrep skip on their own when walking a tree, or that read as options.
ODD_PATHS = ["__pycache__/evil.py", "CVS/evil.py", "x.egg/evil.py", "tests/evil.py",
             "node_modules/evil.py", "build/evil.py", "-rf.py", "we ird/é.py"]
EVIL_PY = 'import os\nos.system(input())\n'


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("static-tools")
    paths: list[str] = []
    for src_dir, prefix in ((CORPUS, "corpus"), (HONEST, "honest")):
        for f in sorted(src_dir.iterdir()):
            if f.suffix != ".md":
                (root / prefix).mkdir(exist_ok=True)
                shutil.copyfile(f, root / prefix / f.name)
                paths.append(f"{prefix}/{f.name}")
    for rel in ODD_PATHS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(EVIL_PY)
        paths.append(rel)
    return root, paths


@pytest.fixture(scope="module")
def semgrep() -> SemgrepAnalyzer:
    return SemgrepAnalyzer()


@pytest.fixture(scope="module")
def semgrep_findings(tree: tuple[Path, list[str]], semgrep: SemgrepAnalyzer) -> list[Finding]:
    root, paths = tree
    return semgrep.scan(root, paths, 120.0)


@pytest.fixture(scope="module")
def bandit_findings(tree: tuple[Path, list[str]]) -> list[Finding]:
    root, paths = tree
    return BanditAnalyzer().scan(root, paths, 120.0)


def at(findings: list[Finding], path: str) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for f in findings:
        if f.path == path:
            out.setdefault(f.line, set()).add(f.rule_id.split(".", 1)[1])
    return out


def markers(path: Path, key: str) -> dict[int, set[str]]:
    out = {}
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        m = re.search(rf"\b{key}: ([\w, -]+)", line)
        if m:
            out[lineno] = {x.strip() for x in m.group(1).split(",") if x.strip()}
    return out


MARKED = sorted(p.name for p in CORPUS.iterdir()
                if p.suffix != ".md" and "expect:" in p.read_text())


# --- semgrep --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MARKED)
def test_semgrep_reports_exactly_the_marked_lines(name: str,
                                                  semgrep_findings: list[Finding]) -> None:
    """Each attack line is caught by the intended rule, and nothing else in the file fires."""
    assert at(semgrep_findings, f"corpus/{name}") == markers(CORPUS / name, "expect")


def test_nosemgrep_hides_nothing(semgrep_findings: list[Finding]) -> None:
    """Attack: '# nosemgrep' on the offending line."""
    lines = at(semgrep_findings, "corpus/py_suppressed.py")
    assert lines[7] == {"py-dynamic-code"} and lines[8] == {"py-dynamic-code"}


def test_cuda_sources_are_scanned_as_cpp(semgrep_findings: list[Finding]) -> None:
    """Attack: system/popen/dlopen/getenv in a .cu file (semgrep skips .cu unless told)."""
    cu = at(semgrep_findings, "corpus/cuda_evil.cu")
    assert cu[12] == {"cpp-process-spawn"}      # std::system, with // nosemgrep
    assert cu[13] == {"cpp-process-spawn"}      # popen
    assert cu[14] == {"cpp-dynamic-loading"}    # dlopen
    assert cu[15] == {"cpp-env-access"}         # getenv
    assert cu[16] == {"cpp-process-spawn"}      # a "//" string must not hide the call after it
    assert 6 not in cu and 7 not in cu          # comments are not calls
    assert at(semgrep_findings, "corpus/cuda_evil_header.cuh")


def test_semgrep_severities_map_to_ours(semgrep_findings: list[Finding]) -> None:
    sev = {f.rule_id: f.severity for f in semgrep_findings}
    assert sev["semgrep.cpp-process-spawn"] == "high"        # ERROR
    assert sev["semgrep.cpp-env-access"] == "medium"         # WARNING
    assert sev["semgrep.cpp-process-exit"] == "low"          # INFO


@pytest.mark.parametrize("rel", ODD_PATHS)
def test_semgrep_scans_paths_tools_like_to_skip(rel: str,
                                                 semgrep_findings: list[Finding]) -> None:
    """Attack: hide the payload under tests/, node_modules/, __pycache__/ or a '-' name."""
    assert at(semgrep_findings, rel) == {2: {"py-process-spawn"}}


def test_semgrep_honest_sources_are_clean(semgrep_findings: list[Finding]) -> None:
    assert [f for f in semgrep_findings if f.path.startswith("honest/")] == []


def test_every_semgrep_rule_has_a_positive_in_the_corpus() -> None:
    expected = set().union(*(ids for name in MARKED
                             for ids in markers(CORPUS / name, "expect").values()))
    ids = {r["id"] for f in RULES_DIR.glob("*.yaml") for r in yaml.safe_load(f.read_text())["rules"]}
    assert ids <= expected, f"rules without a corpus positive: {sorted(ids - expected)}"


def test_semgrep_rule_files_are_well_formed() -> None:
    seen: set[str] = set()
    for f in sorted(RULES_DIR.glob("*.yaml")):
        for rule in yaml.safe_load(f.read_text())["rules"]:
            assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule["id"]), rule["id"]
            assert rule["id"] not in seen
            seen.add(rule["id"])
            assert rule["severity"] in ("INFO", "WARNING", "ERROR")
            assert rule["message"].strip()
            assert rule["languages"] in (["python"], ["cpp"])
    assert len(seen) >= 25


# --- bandit ---------------------------------------------------------------------------------

def test_nosec_hides_nothing(bandit_findings: list[Finding]) -> None:
    """Attack: '# nosec' / '# nosec B602' on the offending lines."""
    got = at(bandit_findings, "corpus/py_suppressed.py")
    for line, ids in markers(CORPUS / "py_suppressed.py", "bandit").items():
        assert ids <= got.get(line, set()), (line, got)


@pytest.mark.parametrize("rel", ODD_PATHS)
def test_bandit_scans_paths_it_would_skip(rel: str, bandit_findings: list[Finding]) -> None:
    """Attack: bandit silently skips __pycache__/, CVS/, *.egg/ even when named explicitly."""
    assert "B605" in at(bandit_findings, rel).get(2, set())


def test_bandit_syntax_error_is_a_finding(bandit_findings: list[Finding]) -> None:
    hits = [f for f in bandit_findings if f.path == "corpus/py_syntax_error.py"]
    assert [(f.rule_id, f.severity) for f in hits] == [("bandit.syntax-error", "high")]


def test_bandit_honest_sources_have_nothing_above_low(bandit_findings: list[Finding]) -> None:
    assert [f for f in bandit_findings if f.path.startswith("honest/")
            and SEVERITY_RANK[f.severity] > SEVERITY_RANK["low"]] == []


def test_honest_sources_clean_for_all_analysers(tree: tuple[Path, list[str]],
                                                 bandit_findings: list[Finding],
                                                 semgrep_findings: list[Finding]) -> None:
    """The honest fixtures (Triton DPS/returning/multi-file, plain torch, CUDA .cu/.cuh)
    produce no medium or high finding from any analyser."""
    root, paths = tree
    honest = [p for p in paths if p.startswith("honest/")]
    ast_findings = AstAnalyzer().scan(root, honest, 10.0)
    bad = [f for f in ast_findings + bandit_findings + semgrep_findings
           if f.path in honest and SEVERITY_RANK[f.severity] >= SEVERITY_RANK["medium"]]
    assert bad == []


# --- tool failures are ToolError, never findings ------------------------------------------

@pytest.mark.parametrize("make", [BanditAnalyzer, SemgrepAnalyzer])
def test_missing_binary_is_a_tool_error(make: type, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.py").write_text("x = 1\n")
    empty = tmp_path / "bin"
    empty.mkdir()
    with pytest.raises(ToolError, match="not found"):
        make(bin_dirs=[empty]).scan(tmp_path / "src", ["k.py"], 10.0)


@pytest.mark.parametrize("make", [BanditAnalyzer, SemgrepAnalyzer])
def test_crashing_tool_is_a_tool_error(make: type, tmp_path: Path) -> None:
    """A tool that dies without a report ('false' standing in for it) is a harness failure."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.py").write_text("x = 1\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    name = "bandit" if make is BanditAnalyzer else "semgrep"
    false = shutil.which("false")
    assert false
    os.symlink(false, bindir / name)
    with pytest.raises(ToolError):
        make(bin_dirs=[bindir]).scan(tmp_path / "src", ["k.py"], 10.0)


def test_tool_timeout_is_a_tool_error(tree: tuple[Path, list[str]]) -> None:
    root, paths = tree
    with pytest.raises(ToolError, match="timed out"):
        BanditAnalyzer().scan(root, paths, 0.05)


def test_broken_rules_are_a_tool_error(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "bad.yaml").write_text("rules:\n  - id: x\n    languages: [python]\n"
                                    "    severity: ERROR\n    message: m\n    pattern: (\n")
    (tmp_path / "k.py").write_text("x = 1\n")
    with pytest.raises(ToolError):
        SemgrepAnalyzer(rules_dir=rules).scan(tmp_path, ["k.py"], 60.0)


def test_empty_rules_dir_is_a_tool_error(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text("x = 1\n")
    with pytest.raises(ToolError, match="no rule files"):
        SemgrepAnalyzer(rules_dir=tmp_path).scan(tmp_path, ["k.py"], 10.0)


def test_policy_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_rules_dir() == RULES_DIR
    shutil.copytree(RULES_DIR, tmp_path / "semgrep")  # the override must hold every rule set
    monkeypatch.setenv(POLICY_DIR_ENV, str(tmp_path))
    assert default_rules_dir() == tmp_path / "semgrep"
    assert SemgrepAnalyzer().rules_dir == tmp_path / "semgrep"


def test_tool_versions(semgrep: SemgrepAnalyzer, semgrep_findings: list[Finding]) -> None:
    assert re.fullmatch(r"bandit \d+\.\d+\.\d+", BanditAnalyzer().version())
    assert re.fullmatch(r"\d+\.\d+\.\d+", semgrep.version())  # from the scan's report
