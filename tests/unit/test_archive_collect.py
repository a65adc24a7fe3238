"""What stages hand to the archive: whole texts where the verdict keeps a tail."""

from __future__ import annotations

from pathlib import Path

from sandboxharness.archive import input_artifacts
from sandboxharness.intake import load_definition, load_workloads
from sandboxharness.models import Solution
from sandboxharness.sandbox import select_backend
from sandboxharness.stages import sanitizer
from sandboxharness.stages.cases import build_cases
from sandboxharness.stages.context import EvaluationContext
from sandboxharness.stages.execute import Plan, RoleRun
from sandboxharness.stages.job import Execution
from tests.conftest import DATA, TRITON_RMS, fast_policy, make_solution

FAKE = Path(__file__).resolve().parents[1] / "gpu" / "data" / "fake-compute-sanitizer"


def test_sanitizer_reports_are_handed_over_whole(tmp_path: Path) -> None:
    """Through the real process sandbox with a stand-in compute-sanitizer: each tool's whole
    report comes back for the archive, while the verdict's details keep only a tail."""
    policy = fast_policy(sanitizer={"tools": ["memcheck", "racecheck"], "timeout_s": 120})
    definition = load_definition(DATA / "tiny" / "rms_t.json")
    cases = build_cases(definition, load_workloads(DATA / "tiny" / "rms_t.jsonl"), policy)
    sol = Solution.model_validate(make_solution(TRITON_RMS))
    (tmp_path / "candidate" / "out").mkdir(parents=True)
    ctx = EvaluationContext(definition=definition, solution=sol, workloads=(), policy=policy,
                            sandbox=select_backend("auto", policy), seed=7, device="cpu",
                            root=tmp_path)
    plan = Plan(cases=cases, bench_cases=cases, trials=1, seed=7, device="cpu", policy=policy)
    run = Execution(cand=RoleRun(role="candidate"), ref=None, plan=plan, cases=cases,
                    data_dir=Path.cwd(), cand_dir=tmp_path / "candidate" / "out",
                    ref_dir=tmp_path / "reference" / "out")
    reports: dict[str, str] = {}
    result = sanitizer.run_tools(ctx, run, executable=str(FAKE), reports=reports)
    assert set(reports) == {"memcheck", "racecheck"}
    assert reports["memcheck"].startswith("========= COMPUTE-SANITIZER")
    assert "fake_kernel" in reports["memcheck"] and "ERROR SUMMARY: 1 error" in reports["memcheck"]
    assert result.details["tools"]["memcheck"]["log_tail"] in reports["memcheck"]


def test_input_artifacts_hash_to_the_verdicts_names() -> None:
    definition = load_definition(DATA / "tiny" / "rms_t.json")
    sol = Solution.model_validate(make_solution(TRITON_RMS))
    policy = fast_policy()
    arts = input_artifacts(definition, sol, load_workloads(DATA / "tiny" / "rms_t.jsonl"), policy)
    from sandboxharness.archive import digest_of

    assert digest_of(arts["solution.json"]) == sol.content_hash()
    assert digest_of(arts["definition.json"]) == definition.content_hash()
    assert digest_of(arts["policy.json"]) == policy.content_hash()
    assert arts["sources/kernel.py"] == TRITON_RMS.encode()
    assert len(arts["workloads.jsonl"].splitlines()) == len(
        load_workloads(DATA / "tiny" / "rms_t.jsonl"))
