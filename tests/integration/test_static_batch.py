"""``run_static_batch``: one bandit and one semgrep process for many candidates, and for each
candidate exactly the answer ``run_static`` gives it alone (real tools, the kernels/ corpus).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandboxharness.errors import ToolError
from sandboxharness.intake import load_definition, load_policy, load_solution
from sandboxharness.models import Definition, Policy, Solution
from sandboxharness.static import (
    BanditAnalyzer,
    SemgrepAnalyzer,
    StaticReport,
    run_static,
    run_static_batch,
)
from sandboxharness.static.batch import BATCH_BUDGET_CAP_S, batch_budget_s
from tests.conftest import REPO

KERNELS = REPO / "kernels"
REDTEAM = KERNELS / "redteam"

# Red-team cases the static or policy stage catches (bandit, semgrep, AST and policy findings
# among them), and ones only later stages catch (clean here).
REDTEAM_FLAGGED = ["cache_data_ptr", "try_except_fallback", "baseline_flashinfer",
                   "reference_exec_copy", "timer_patch_perf_counter", "background_thread",
                   "patch_allclose", "nosec_subprocess", "obf_importlib", "base64_exec",
                   "ctypes_libc", "env_secrets", "decoy_triton_torch_compute"]
REDTEAM_CLEAN = ["zeros_output", "constant_uniform", "input_scratch_mutation"]
# kernels/solutions: honest (Triton and plain torch: both settings of the AST rules) and
# forbidden ones; kernels/gpu: CUDA and C++ sources for semgrep.
SOLUTIONS = ["gemm_n64_k128/torch_dps", "gemm_n64_k128/triton_dps", "rmsnorm_h128/triton_dps",
             "softmax_v512/triton_returning", "rmsnorm_f32_h128/torch_returning",
             "gemm_n64_k128/forbidden_exec", "rmsnorm_h128/forbidden_subprocess",
             "softmax_v512/forbidden_pickle", "silu_and_mul_d256/forbidden_os_system"]
GPU = ["axpy_f32/cuda_torch_honest", "axpy_f32/cuda_tvmffi_honest", "axpy_f32/bug_oob_read"]

Item = tuple[Solution, Definition | None]


def _redteam(case_id: str) -> Item:
    cases = {c["id"]: c for c in json.loads((REDTEAM / "manifest.json").read_text())["cases"]}
    case = cases[case_id]
    return (load_solution(REDTEAM / case["solution"]),
            load_definition(REDTEAM / case["definition_file"]))


def _solution(name: str, under: Path) -> Item:
    sol = load_solution(under / "solutions" / f"{name}.json")
    return sol, load_definition(under / "definitions" / f"{sol.definition}.json")


def solution(sources: dict[str, str], entry: str = "kernel.py::run",
             language: str = "triton") -> Solution:
    return Solution.model_validate({
        "name": "cand", "definition": "rms", "author": "tests",
        "spec": {"language": language, "target_hardware": ["H100"], "entry_point": entry,
                 "destination_passing_style": True},
        "sources": [{"path": p, "content": c} for p, c in sources.items()],
    })


KERNEL = "def run(x, y):\n    y.copy_(x)\n"
BROKEN = "def run(x, y:\n    eval(x)\n"  # bandit's and the AST rules' parse errors


def _corpus() -> dict[str, Item]:
    items = {f"redteam/{c}": _redteam(c) for c in REDTEAM_FLAGGED + REDTEAM_CLEAN}
    items |= {f"solutions/{n}": _solution(n, KERNELS) for n in SOLUTIONS}
    items |= {f"gpu/{n}": _solution(n, KERNELS / "gpu") for n in GPU}
    items["synthetic/unparsable"] = (solution({"kernel.py": KERNEL, "bad.py": BROKEN}), None)
    return items


CORPUS = _corpus()


@pytest.fixture(scope="module")
def default_policy() -> Policy:
    return load_policy(REPO / "policies" / "default.yaml")


def _same(batched: StaticReport, alone: StaticReport) -> None:
    """Everything but the durations' values and the batch size is equal."""
    assert batched.findings == alone.findings
    assert batched.blocking == alone.blocking
    assert batched.flagged == alone.flagged
    assert batched.violations == alone.violations
    assert batched.tools == alone.tools
    assert batched.durations.keys() == alone.durations.keys()
    assert alone.batch == 1


def _counting(method: Callable[..., Any], calls: list[int]) -> Callable[..., Any]:
    """The real ``scan``, counted (each call is one tool process)."""
    def scan(self: Any, root: Path, paths: list[str], timeout_s: float) -> Any:
        calls.append(len(paths))
        return method(self, root, paths, timeout_s)
    return scan


@pytest.fixture(scope="module")
def corpus_reports(default_policy: Policy, tmp_path_factory: pytest.TempPathFactory
                   ) -> tuple[list[StaticReport], list[StaticReport], dict[str, list[int]]]:
    items = list(CORPUS.values())
    calls: dict[str, list[int]] = {"bandit": [], "semgrep": []}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(BanditAnalyzer, "scan", _counting(BanditAnalyzer.scan, calls["bandit"]))
        mp.setattr(SemgrepAnalyzer, "scan", _counting(SemgrepAnalyzer.scan, calls["semgrep"]))
        batched = run_static_batch(items, default_policy, tmp_path_factory.mktemp("batch"))
    alone = [run_static(s, d, default_policy, tmp_path_factory.mktemp("alone"))
             for s, d in items]
    return batched, alone, calls


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(CORPUS)), ids=list(CORPUS))
def test_batch_gives_each_candidate_its_one_by_one_report(
        index: int, corpus_reports: tuple[list[StaticReport], list[StaticReport], Any]) -> None:
    batched, alone, _ = corpus_reports
    _same(batched[index], alone[index])
    assert batched[index].batch == len(CORPUS)


@pytest.mark.slow
def test_corpus_batch_is_not_vacuous(
        corpus_reports: tuple[list[StaticReport], list[StaticReport], dict[str, list[int]]]
        ) -> None:
    """One process per tool, over every member's files; findings from every analyser;
    blocked and clean candidates both present."""
    batched, alone, calls = corpus_reports
    assert len(batched) == len(CORPUS)
    assert [len(c) for c in calls.values()] == [1, 1]
    assert calls["semgrep"][0] == sum(len(s.sources) for s, _ in CORPUS.values())
    tools = {f.tool for r in alone for f in r.findings}
    assert {"bandit", "semgrep", "ast", "policy"} <= tools
    blocked = [name for name, r in zip(CORPUS, alone, strict=True) if r.blocking]
    assert len(blocked) >= 10 and len(CORPUS) - len(blocked) >= 5, blocked
    unparsable = {f.rule_id for f in batched[list(CORPUS).index("synthetic/unparsable")].findings}
    assert {"bandit.syntax-error", "ast.syntax-error"} <= unparsable
    # analyser time is shared evenly: every member carries the same share
    assert len({tuple(sorted((k, v) for k, v in r.durations.items() if k != "policy"))
                for r in batched}) == 1


BAD = "import subprocess\n\ndef helper(cmd):\n    return subprocess.call(cmd, shell=True)\n"


def test_a_path_named_like_another_member_stays_with_its_own_solution(
        default_policy: Policy, tmp_path: Path) -> None:
    """Solution 0's ``1/x.py`` sits at ``<root>/0/1/x.py``: it is solution 0's, never
    solution 1's ``x.py``."""
    items: list[Item] = [(solution({"kernel.py": KERNEL, "1/x.py": BAD}), None),
                         (solution({"kernel.py": KERNEL, "x.py": KERNEL}), None),
                         (solution({"kernel.py": KERNEL, "0/x.py": KERNEL}), None)]
    batched = run_static_batch(items, default_policy, tmp_path / "batch")
    alone = [run_static(s, d, default_policy, tmp_path / "alone") for s, d in items]
    for b, a in zip(batched, alone, strict=True):
        _same(b, a)
    paths = {f.path for f in batched[0].findings}
    assert paths == {"1/x.py"} and {f.tool for f in batched[0].findings} >= {"bandit", "semgrep"}
    assert batched[0].blocking
    assert batched[1].findings == [] and batched[2].findings == []


def test_an_empty_batch_is_an_empty_list(default_policy: Policy, tmp_path: Path) -> None:
    assert run_static_batch([], default_policy, tmp_path) == []


def test_a_batch_of_one_is_run_static(default_policy: Policy, tmp_path: Path) -> None:
    item = _redteam("nosec_subprocess")
    [batched] = run_static_batch([item], default_policy, tmp_path / "batch")
    alone = run_static(*item, default_policy, tmp_path / "alone")
    _same(batched, alone)
    assert batched.batch == 1 and batched.blocking


def test_each_member_is_written_in_its_own_private_directory(default_policy: Policy,
                                                             tmp_path: Path) -> None:
    items: list[Item] = [(solution({"kernel.py": KERNEL}), None),
                         (solution({"kernel.py": KERNEL, "a/b.py": KERNEL}), None)]
    run_static_batch(items, default_policy, tmp_path, analyzers=[])
    [root] = list(tmp_path.iterdir())
    assert root.stat().st_mode & 0o777 == 0o700
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == ["0/kernel.py", "1/a/b.py", "1/kernel.py"]
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in root.rglob("*") if p.is_file())


def test_per_member_violations_stay_with_their_member(default_policy: Policy,
                                                      tmp_path: Path) -> None:
    """Non-UTF-8 text, an entry no analyser reads and a denied import, each in one member."""
    items: list[Item] = [
        (solution({"kernel.py": KERNEL, "bad.py": "x = '\udcff'\n"}), None),
        (solution({"kernel.so": "not python", "kernel.py": KERNEL},
                  entry="kernel.so::run"), None),
        (solution({"kernel.py": "import socket\n" + KERNEL}), None),
        (solution({"kernel.py": KERNEL}), None),
    ]
    batched = run_static_batch(items, default_policy, tmp_path / "batch")
    alone = [run_static(s, d, default_policy, tmp_path / "alone") for s, d in items]
    for b, a in zip(batched, alone, strict=True):
        _same(b, a)
    assert [bool(b.violations) for b in batched] == [True, True, True, False]


def test_a_tool_failure_fails_the_whole_batch(default_policy: Policy, tmp_path: Path) -> None:
    items: list[Item] = [(solution({"kernel.py": KERNEL}), None)] * 2
    with pytest.raises(ToolError, match="bandit: executable not found"):
        run_static_batch(items, default_policy, tmp_path,
                         analyzers=[BanditAnalyzer(bin_dirs=[tmp_path])])


def test_a_batch_past_its_budget_fails(tmp_path: Path) -> None:
    policy = Policy.model_validate({"name": "t", "static": {"timeout_s": 1e-9}})
    items: list[Item] = [(solution({"kernel.py": KERNEL}), None)] * 2
    with pytest.raises(ToolError, match="budget before"):
        run_static_batch(items, policy, tmp_path)


def test_the_budget_is_per_member_and_capped() -> None:
    assert batch_budget_s(120.0, 1) == 120.0
    assert batch_budget_s(10.0, 4) == 40.0
    assert batch_budget_s(120.0, 1000) == BATCH_BUDGET_CAP_S
    assert batch_budget_s(2 * BATCH_BUDGET_CAP_S, 3) == 2 * BATCH_BUDGET_CAP_S


def test_durations_are_the_batch_s_shared_evenly(default_policy: Policy, tmp_path: Path) -> None:
    items: list[Item] = [(solution({"kernel.py": KERNEL}), None)] * 3
    batched = run_static_batch(items, default_policy, tmp_path)
    assert [r.batch for r in batched] == [3, 3, 3]
    shares = [dataclasses.replace(r, durations={k: v for k, v in r.durations.items()
                                                if k != "policy"}) for r in batched]
    assert shares[0].durations.keys() == {"ast", "bandit", "semgrep"}
    assert shares[0].durations == shares[1].durations == shares[2].durations
