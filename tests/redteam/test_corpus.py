"""The red-team corpus (kernels/redteam/manifest.json): every cheat rejected with its code.

First line: each case through the CLI, as a user runs it (`evaluate --json`, default policy plus
the case's documented overrides), must be rejected with its expected reason code.
Second line: cases that static analysis catches are run again with the analysers switched off;
where the manifest names run-time codes that also catch the cheat, the runtime defenses must
reject it on their own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandboxharness.intake import load_definition, load_solution, load_workloads
from sandboxharness.pipeline import Harness
from tests.conftest import REPO, fast_policy

RT = REPO / "kernels" / "redteam"
MANIFEST = json.loads((RT / "manifest.json").read_text())
RUNTIME_CODES = {"INCORRECT_NUMERICAL", "NONFINITE_OUTPUT", "INCORRECT_TYPE", "INPUT_MUTATED",
                 "INTEGRITY_VIOLATION", "TIMING_INCONSISTENT", "BENCH_OUTPUT_MISMATCH",
                 "WORKER_PROTOCOL", "RUNTIME_ERROR", "TIMEOUT", "INCORRECT_SHAPE",
                 "INCORRECT_DTYPE", "RESOURCE_LIMIT"}


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k),
                                                                             dict) else v
    return out


def _params(select) -> list[Any]:  # type: ignore[no-untyped-def]
    out = []
    for case in MANIFEST["cases"]:
        if not select(case):
            continue
        marks = [pytest.mark.gpu] if case["needs_gpu"] and case["caught_by"] in (
            "correctness", "benchmark") else []
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(lambda c: True))
def test_cheat_is_rejected_through_the_cli(case: dict[str, Any], tmp_path: Path) -> None:
    policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
    policy = _deep_merge(policy, {"name": f"default+{case['id']}", **(case.get("policy") or {})})
    pol = tmp_path / "policy.yaml"
    pol.write_text(yaml.safe_dump(policy))
    proc = subprocess.run(
        [sys.executable, "-m", "sandboxharness.cli", "evaluate", "--json",
         "--definition", RT / case["definition_file"], "--workloads", RT / case["workloads_file"],
         "--solution", RT / case["solution"], "--policy", pol],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, f"{case['attack']}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    verdict = json.loads(proc.stdout)
    codes = {r["code"] for r in verdict["reasons"]}
    assert verdict["decision"] == "reject"
    assert case["expected"] in codes, (case["attack"], verdict["reasons"])


def _second_line(case: dict[str, Any]) -> bool:
    return case["caught_by"] in ("static", "policy") and bool(
        set(case.get("also_acceptable") or []) & RUNTIME_CODES)


@pytest.mark.slow
@pytest.mark.parametrize("case", [
    pytest.param(p.values[0], id=p.id, marks=[pytest.mark.gpu] if p.values[0]["needs_gpu"] else [])
    for p in _params(_second_line)])
def test_runtime_defenses_catch_it_without_static_analysis(case: dict[str, Any]) -> None:
    policy = fast_policy(**(case.get("policy") or {}))
    d = load_definition(RT / case["definition_file"])
    verdict = Harness(policy).evaluate(d, load_solution(RT / case["solution"]),
                                       load_workloads(RT / case["workloads_file"]), seed=11)
    codes = {r.code.value for r in verdict.reasons}
    allowed = set(case["also_acceptable"]) & RUNTIME_CODES
    assert verdict.decision == "reject", case["attack"]
    assert codes & allowed, (case["attack"], [r.message for r in verdict.reasons])
