"""The export reads profile signatures where the profile stage writes them: a real profile job
(the process sandbox, the worker under the stand-in ncu) makes the stage result, and the
report finds its per-regime ``details.signatures`` entries by workload, or by axes for a
workload of the same regime that was not the one profiled."""

from __future__ import annotations

import json
from pathlib import Path

from sandboxharness.intake import load_workloads
from sandboxharness.models import Stage, StageResult, Verdict
from sandboxharness.profile.evidence import regime_signatures
from sandboxharness.report.load import load_input
from sandboxharness.report.tables import all_tables
from sandboxharness.stages import profile
from sandboxharness.stages.cases import build_cases
from sandboxharness.stages.execute import Plan, RoleRun
from sandboxharness.stages.job import Execution
from tests.unit.test_profile_stage import FAKE_NCU, _ctx
from tests.unit.test_report_tables import _dataset, _store, gpu_verdict

# a third workload in b=16's regime: the profile stage measures only the first of a regime
SAME_REGIME = {"definition": "rms_t", "solution": None, "evaluation": None, "workload": {
    "uuid": "c", "axes": {"b": 16}, "inputs": {"x": {"type": "random"}, "w": {"type": "random"}}}}


def _profiled(tmp_path: Path, workloads: Path) -> StageResult:
    """The profile stage's result for rms_t's workloads, made by the stage itself."""
    ctx = _ctx(tmp_path, "cpu", profile={"enabled": True, "timeout_s": 120})
    cases = build_cases(ctx.definition, load_workloads(workloads), ctx.policy)
    (tmp_path / "candidate" / "out").mkdir(parents=True)
    plan = Plan(cases=cases, bench_cases=cases, trials=1, seed=7, device="cpu",
                policy=ctx.policy)
    run = Execution(cand=RoleRun(role="candidate"), ref=None, plan=plan, cases=cases,
                    data_dir=Path.cwd(), cand_dir=tmp_path / "candidate" / "out",
                    ref_dir=tmp_path / "reference" / "out")
    return profile.run_profile(ctx, run, str(FAKE_NCU))


def _with_profile(result: StageResult) -> Verdict:
    """A GPU-shaped verdict whose only signatures are the profile stage's (the benchmark's
    regimes lose theirs), with the profile stage after the benchmark, as the pipeline
    orders them, and correctness cases for all three workloads."""
    doc = gpu_verdict("k1").model_dump(mode="json")
    for st in doc["stages"]:
        for regime in st["details"].get("regimes", []):
            regime.pop("signature")
        if st["stage"] == "correctness":
            st["details"]["cases"].insert(2, {"workload": "c", "axes": {"b": 16},
                                              "heldout": False, "trials": []})
    doc["stages"].append(result.model_dump(mode="json"))
    return Verdict.model_validate(doc)


def test_profile_stage_signatures_reach_the_results_rows(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds")
    wl = root / "workloads" / "rms_t.jsonl"
    wl.write_text(wl.read_text() + json.dumps(SAME_REGIME) + "\n")
    result = _profiled(tmp_path / "job", wl)
    assert result.stage is Stage.PROFILE and result.status == "passed", result.details
    entries = result.details["signatures"]
    assert [e["regime"] for e in entries] == ["b=4", "b=16"]
    assert entries[0]["workload"] == "a" and entries[1]["workload"] in ("b", "c")  # one of two
    assert set(regime_signatures(result.details)) == {"b=4", "b=16"}  # the loop's reader agrees
    _store(root, _with_profile(result))
    tables = all_tables(load_input(root))
    got = {r["workload"]: (r["sig_kernel"], r["sig_bottleneck"], r["sig_limiter"],
                           r["sig_duration_us"]) for r in tables["results"]}
    large = ("_rms_kernel", "memory", "dram_bandwidth", 412.16)
    assert got["b"] == large and got["c"] == large  # the one not profiled: by its axes
    assert got["a"][1:3] == ("launch", "short_kernel")
    verdict_row = tables["verdicts"][0]
    assert verdict_row["profile_status"] == "passed"
    assert verdict_row["profile_s"] == result.duration_s
    assert tables["results"][0]["profile_s"] == result.duration_s


def test_a_verdict_without_a_profile_has_no_signature(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds")
    skipped = StageResult(stage=Stage.PROFILE, status="skipped", duration_s=0.0,
                          details={"reason": "no CUDA device: Nsight Compute needs a GPU"})
    _store(root, _with_profile(skipped))
    rows = all_tables(load_input(root))["results"]
    assert {r["sig_kernel"] for r in rows} == {None}
    assert {r["profile_s"] for r in rows} == {0.0}


def test_every_signature_column_is_a_signature_field() -> None:
    from sandboxharness.profile.signature import Signature
    from sandboxharness.report.schema import SIGNATURE_FIELDS

    assert {name for name, _ in SIGNATURE_FIELDS} <= set(Signature.model_fields)
    assert {"bottleneck", "limiter", "dram_throughput_pct"} <= {n for n, _ in SIGNATURE_FIELDS}
