"""The verdict store, the export rows and the schema, on verdicts shaped like real GPU ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sandboxharness.dataset import verdictstore
from sandboxharness.dataset.layout import load_dataset
from sandboxharness.dataset.tracefile import TraceWriter
from sandboxharness.dataset.verdictstore import VerdictWriter, iter_stored, iter_verdicts
from sandboxharness.errors import InputError
from sandboxharness.models import (
    Candidate,
    Environment,
    Reason,
    ReasonCode,
    Stage,
    StageResult,
    Subject,
    Verdict,
)
from sandboxharness.report import schema
from sandboxharness.report.build import export_dataset
from sandboxharness.report.load import load_campaign, load_input
from sandboxharness.report.tables import all_tables
from sandboxharness.traces import to_traces
from tests.conftest import DATA, REPO

SIG = {"kernel": "rms_kernel", "bottleneck": "memory", "limiter": "dram",
       "duration_us": 12.5, "registers_per_thread": 40, "achieved_occupancy_pct": 61.0}


def _dataset(root: Path) -> Path:
    (root / "definitions").mkdir(parents=True)
    (root / "workloads").mkdir()
    shutil.copy(DATA / "tiny" / "rms_t.json", root / "definitions" / "rms_t.json")
    shutil.copy(DATA / "tiny" / "rms_t.jsonl", root / "workloads" / "rms_t.jsonl")
    return root


def _timing(median: float) -> dict[str, float]:
    return {"median_ms": median, "p25_ms": median * 0.9, "p75_ms": median * 1.2,
            "min_ms": median * 0.8, "mean_ms": median * 1.05, "dispersion": 0.3, "n": 50.0}


def gpu_verdict(name: str, *, median: float = 0.01, decision: str = "promote",
                author: str = "alice", started: str = "2026-01-01T00:00:00Z") -> Verdict:
    """A verdict with the benchmark details a GPU run writes (timing, regimes with the
    FlashInfer baseline and roofline, a profile signature)."""
    cases = [{"workload": u, "axes": {"b": b}, "heldout": False, "trials": [
        {"status": "PASSED", "outputs": {"y": {"max_abs": 1e-4, "max_rel": 2e-4}}}]}
        for u, b in (("a", 4), ("b", 16))]
    cases.append({"workload": "heldout:h3", "axes": {"b": 3}, "heldout": True, "trials": []})
    timed = [{"workload": u, "axes": {}, "candidate": _timing(median), "speedup": 0.02 / median,
              "reference": _timing(0.02), "clock": {"method": "cupti"}} for u in ("a", "b")]
    regimes = [{"workload": u, "axes": {}, "flashinfer_median_ms": 0.015,
                "speedup_vs_flashinfer": 0.015 / median, "signature": SIG,
                "roofline": {"bound": "memory", "pct_of_speed_of_light": 42.0,
                             "speed_of_light_ms": 0.004}} for u in ("a", "b")]
    reasons = [] if decision == "promote" else [Reason(
        code=ReasonCode.SLOWER_THAN_BASELINE, stage=Stage.BENCHMARK, message="=1+1 slower")]
    stages = [
        StageResult(stage=Stage.STATIC, status="passed", duration_s=0.5),
        StageResult(stage=Stage.COMPILE, status="passed", duration_s=2.0),
        StageResult(stage=Stage.CORRECTNESS, status="passed", duration_s=1.0,
                    details={"cases": cases}),
        StageResult(stage=Stage.BENCHMARK, status="failed" if reasons else "passed",
                    duration_s=3.0, reasons=reasons,
                    details={"workloads": timed, "regimes": regimes, "speedup_geomean": 2.0})]
    return Verdict(
        decision=decision, reasons=reasons, stages=stages,  # type: ignore[arg-type]
        candidate=Candidate(name=name, sha256="sha256:" + "1" * 64, author=author,
                            language="triton", definition="rms_t"),
        definition=Subject(name="rms_t", sha256="sha256:" + "2" * 64),
        policy=Subject(name="p", sha256="sha256:" + "3" * 64), seed=9,
        environment=Environment(harness_version="0.1.0", python="3.11", torch="2.13",
                                triton="3.4", platform="Linux", device="NVIDIA H200",
                                backend="process", extra={"driver": "580.1"}),
        started_at=started, finished_at=started)


def _store(root: Path, *verdicts: Verdict) -> None:
    ds = load_dataset(root)
    d = ds.definitions["rms_t"]
    for v in verdicts:
        VerdictWriter(root).append(d.definition, v)
        TraceWriter().append(ds.trace_path(d.definition), to_traces(v, list(d.workloads)))


def test_store_drops_a_torn_tail_and_names_a_bad_line(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds")
    _store(root, gpu_verdict("k1"))
    path = next((root / "verdicts").rglob("*.jsonl"))
    with path.open("ab") as fh:
        fh.write(b'{"schema_version": 1, "decis')  # a crash mid-append
    assert [v.candidate.name for v in iter_verdicts(root)] == ["k1"]
    _store(root, gpu_verdict("k2"))  # the next append repairs first
    assert [(s.verdict.candidate.name, s.line) for s in iter_stored(root)] == [("k1", 1),
                                                                             ("k2", 2)]
    with path.open("a") as fh:
        fh.write('{"decision": "promote"}\n')
    with pytest.raises(InputError, match=r"rms_t\.jsonl:3.*not a verdict"):
        list(iter_verdicts(root))


def test_an_oversized_line_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _dataset(tmp_path / "ds")
    _store(root, gpu_verdict("k1"))
    monkeypatch.setattr(verdictstore, "MAX_VERDICT_LINE", 100)
    with pytest.raises(InputError, match="over the 100-byte cap"):
        list(iter_verdicts(root))


def test_results_carry_gpu_measures_signature_and_environment(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds")
    _store(root, gpu_verdict("k1", median=0.04, decision="reject"), gpu_verdict("k1"))
    tables = all_tables(load_input(root))
    rows = tables["results"]
    assert [(r["solution"], r["workload"]) for r in rows] == [("k1", "a"), ("k1", "b")]
    r = rows[0]  # the newest verdict of k1 (the promoted one), held-out sizes left out
    assert (r["decision"], r["status"], r["latency_ms"], r["flashinfer_ms"]) == \
        ("promote", "PASSED", 0.01, 0.015)
    assert r["speedup"] == pytest.approx(2.0) and r["speedup_vs_flashinfer"] == \
        pytest.approx(1.5)
    assert (r["pct_sol"], r["bound"], r["clock"], r["driver"]) == (42.0, "memory", "cupti",
                                                                   "580.1")
    assert (r["sig_kernel"], r["sig_registers_per_thread"], r["sig_waves_per_sm"]) == \
        ("rms_kernel", 40, None)
    assert (r["compile_s"], r["sanitizer_s"], r["max_abs_error"]) == (2.0, None, 1e-4)
    assert r["verdict_sha256"].startswith("sha256:") and r["run_id"] == "seed:9"
    assert len(tables["verdicts"]) == 2 and tables["verdicts"][0]["reasons"] == \
        "SLOWER_THAN_BASELINE"


def test_traces_without_a_stored_verdict_still_give_rows(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds")
    _store(root, gpu_verdict("k1"))
    shutil.rmtree(root / "verdicts")  # e.g. traces written by FlashInfer-Bench itself
    rows = all_tables(load_input(root))["results"]
    assert [(r["solution"], r["status"], r["decision"]) for r in rows] == \
        [("k1", "PASSED", None), ("k1", "PASSED", None)]
    assert rows[0]["latency_ms"] == 0.01 and rows[0]["compile_s"] is None


def test_parquet_and_csv_follow_the_schema(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds")
    _store(root, gpu_verdict("=HYPERLINK(\"x\")", decision="reject"))
    export_dataset(root, tmp_path / "pq", "parquet")
    table = pq.read_table(tmp_path / "pq" / "results.parquet")
    assert table.schema.names == [c.name for c in schema.RESULTS]
    assert table.schema.field("latency_ms").metadata[b"doc"].startswith(b"Candidate median")
    assert table.column("solution").to_pylist()[0] == '=HYPERLINK("x")'  # data unchanged
    export_dataset(root, tmp_path / "csv", "csv")
    text = (tmp_path / "csv" / "results.csv").read_text()
    assert "'=HYPERLINK" in text and ',"=HYPERLINK' not in text  # no formula for a sheet
    rounds = (tmp_path / "csv" / "rounds.csv").read_text().splitlines()
    assert rounds == [",".join(f'"{c.name}"' for c in schema.ROUNDS)]


def test_schema_document_is_generated_from_the_schema() -> None:
    assert (REPO / "docs" / "EXPORT_SCHEMA.md").read_text() == schema.markdown()


def campaign_dir(tmp_path: Path) -> Path:
    """A campaign state written by the loop's own state writer (hash-chained)."""
    from sandboxharness.loop.state import CampaignState

    state = CampaignState.open(tmp_path / "camp")
    state.append("campaign", {"definition": "rms_t"})
    state.append("baseline", {"best_mean_ms": 0.02, "verdicts": ["sha256:x"]})
    state.append("round_started", {"round": 1})
    state.append("round", {"round": 1, "verdict": "reject", "hypothesis": "tile 128",
                           "candidates": [{"name": "a"}, {"name": "b"}]})
    state.append("round", {"round": 2, "verdict": "promote", "best_mean_ms": 0.01,
                           "hypothesis": "=1+1", "candidates": []})
    state.append("round", {"round": 3, "verdict": "archive", "candidates": []})
    return state.root


def test_campaign_rounds_come_from_the_verified_state(tmp_path: Path) -> None:
    folder = campaign_dir(tmp_path)
    camp = load_campaign(folder)
    assert camp is not None
    assert [(r.round, r.verdict, r.best_mean_ms, r.candidates, r.hypothesis, r.definition)
            for r in camp.rounds] == [
        (0, "baseline", 0.02, 1, "baseline: the starting solution", "rms_t"),
        (1, "reject", 0.02, 2, "tile 128", "rms_t"), (2, "promote", 0.01, 0, "=1+1", "rms_t"),
        (3, "archive", 0.01, 0, None, "rms_t")]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert load_campaign(empty) is None  # no state yet: no rounds table rows
    with pytest.raises(InputError, match="no such campaign"):
        load_campaign(tmp_path / "missing")
    state = folder / "state.json"
    state.write_text(state.read_text().replace('"tile 128"', '"tile 256"'))
    with pytest.raises(InputError, match="state.json"):
        load_campaign(folder)  # an edited history is refused, never reported
