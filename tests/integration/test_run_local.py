"""``sandboxharness run --local``: a whole dataset, real sandboxed workers, FIB-readable traces."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxharness.dataset import RunOptions, load_dataset, run_dataset
from sandboxharness.dataset.tracefile import TraceWriter, repair, traced
from sandboxharness.errors import InputError
from sandboxharness.intake import load_policy
from tests.conftest import DATA, REPO, make_solution

GOOD = """import torch
def run(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
"""
WRONG = """import torch
def run(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
"""
SHELL = """import os
def run(x, w):
    os.system("id")
    return x
"""
POLICY = ("name: dataset-test\nimports: {deny: []}\n"
          "static: {bandit: false, semgrep: false, ast_rules: true}\n"
          "limits: {compile_timeout_s: 60, run_timeout_s: 60}\n"
          "correctness: {trials: 1, heldout_values: [3], heldout_count: 1}\n"
          "benchmark: {warmup: 1, iterations: 4, sampled_checks: 1}\n")


def _dataset(root: Path, solutions: dict[str, str]) -> Path:
    (root / "definitions" / "rmsnorm").mkdir(parents=True)
    (root / "workloads" / "rmsnorm").mkdir(parents=True)
    (root / "solutions" / "rms_t").mkdir(parents=True)
    shutil.copy(DATA / "tiny" / "rms_t.json", root / "definitions" / "rmsnorm" / "rms_t.json")
    shutil.copy(DATA / "tiny" / "rms_t.jsonl", root / "workloads" / "rmsnorm" / "rms_t.jsonl")
    for name, code in solutions.items():
        doc = make_solution(code, name=name, dps=False, language="python")
        (root / "solutions" / "rms_t" / f"{name}.json").write_text(json.dumps(doc))
    return root


@pytest.fixture
def policy_path(tmp_path: Path) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(POLICY)
    return p


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sandboxharness.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)


def test_run_local_traces_every_solution_and_fib_reads_them(tmp_path: Path,
                                                             policy_path: Path) -> None:
    root = _dataset(tmp_path / "ds", {"good": GOOD, "wrong": WRONG, "shell": SHELL})
    log = tmp_path / "events.jsonl"
    res = _cli("run", "--local", str(root), "--policy", str(policy_path), "--backend",
               "process", "--jobs", "2", "--json", "--log-file", str(log),
               "--audit-log", str(tmp_path / "audit.jsonl"))
    assert res.returncode == 0, res.stderr  # rejections are results
    summary = json.loads(res.stdout)
    decisions = {c["solution"]: (c["decision"], c["reasons"]) for c in summary["candidates"]}
    assert decisions["good"] == ("promote", [])
    assert decisions["wrong"][0] == "reject" and "INCORRECT_NUMERICAL" in decisions["wrong"][1]
    assert decisions["shell"][0] == "reject"
    lines = (root / "traces" / "rmsnorm" / "rms_t.jsonl").read_text().splitlines()
    statuses = {}
    for line in lines:
        t = json.loads(line)
        statuses.setdefault(t["solution"], set()).add(t["evaluation"]["status"])
    # two workloads each: the rejected-before-running one still says why, per workload
    assert statuses == {"good": {"PASSED"}, "wrong": {"INCORRECT_NUMERICAL"},
                        "shell": {"RUNTIME_ERROR"}}
    assert any("STATIC_FINDING" in t for t in lines)  # the batch found the shell call
    assert len(lines) == 6
    # FlashInfer-Bench's own loader reads the dataset with our traces
    fib = pytest.importorskip("flashinfer_bench.data")
    ts = fib.TraceSet.from_path(str(root))
    assert len(ts.traces["rms_t"]) == 6
    passed = [t for t in ts.traces["rms_t"] if t.evaluation.status.value == "PASSED"]
    assert passed and all(t.evaluation.performance.latency_ms > 0 for t in passed)
    # the event log: one line per candidate start and end, stages in between
    events = [json.loads(x) for x in log.read_text().splitlines()]
    ends = [e for e in events if e["event"] == "candidate.end"]
    assert sorted(e["solution"] for e in ends) == ["good", "shell", "wrong"]
    assert any(e["event"] == "stage.end" and e["stage"] == "correctness" for e in events)
    # every verdict is in the audit log, and it verifies
    pub = next(tmp_path.glob("*.pub"))
    check = _cli("audit", "verify", str(tmp_path / "audit.jsonl"), "--public-key", str(pub))
    assert check.returncode == 0, check.stdout + check.stderr
    records = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert len(records) == 3 and all(json.loads(r)["decision"] for r in records)


def test_the_reference_is_timed_once_for_a_definitions_candidates(tmp_path: Path,
                                                                   policy_path: Path) -> None:
    """Candidates of one definition share the run's seed: one of them times the reference,
    the others reuse that timing (as FlashInfer-Bench times its reference once per workload),
    even when they run side by side; the verdict names who timed it."""
    root = _dataset(tmp_path / "ds", {"good": GOOD, "good2": GOOD.replace("1e-6", "1e-6 ")})
    policy = load_policy(policy_path)
    summary = run_dataset(root, RunOptions(policy=policy, backend="process", seed=5, jobs=2))
    benches = {o.task.solution: o.verdict.stage("benchmark") for o in summary.outcomes
               if o.verdict is not None}
    assert set(benches) == {"good", "good2"}
    timed_by = {name: b.details.get("reference_timed_by") for name, b in benches.items()}
    first = next(name for name, by in timed_by.items() if by is None)  # timed it itself
    other = ({"good", "good2"} - {first}).pop()
    assert timed_by[other] == first
    refs = {name: [w["reference"] for w in b.details["workloads"]] for name, b in benches.items()}
    assert refs[other] == refs[first]  # the same measurement, not another one
    assert benches[other].details["host_s"].get("reference_benchmark", 0.0) == 0.0
    assert benches[first].details["host_s"]["reference_benchmark"] > 0.0


def test_resume_skips_what_is_traced_and_reruns_what_is_not(tmp_path: Path,
                                                            policy_path: Path) -> None:
    root = _dataset(tmp_path / "ds", {"good": GOOD, "wrong": WRONG})
    policy = load_policy(policy_path)
    first = run_dataset(root, RunOptions(policy=policy, backend="process", seed=7,
                                         solutions=["good"]))
    assert [o.verdict.decision for o in first.outcomes if o.verdict] == ["promote"]
    assert "batch" not in first.outcomes[0].verdict.stage("static").details  # a batch of one
    again = run_dataset(root, RunOptions(policy=policy, backend="process", seed=7, resume=True))
    assert [t.solution for t in again.skipped] == ["good"]
    assert [o.task.solution for o in again.outcomes] == ["wrong"]
    # another policy is another result: nothing is skipped
    other = policy.model_copy(update={"name": "other"})
    assert other.content_hash() != policy.content_hash()
    ds = load_dataset(root)
    path = ds.trace_path(ds.definitions["rms_t"].definition)
    from sandboxharness._internal.host import harness_version

    assert traced(path, harness=harness_version(), policy_sha256=other.content_hash()) == set()


def test_bad_dataset_is_one_line_exit_2_before_anything_runs(tmp_path: Path,
                                                             policy_path: Path) -> None:
    root = _dataset(tmp_path / "ds", {"good": GOOD})
    orphan = make_solution(GOOD, name="orphan", definition="nope", dps=False, language="python")
    (root / "solutions" / "orphan.json").write_text(json.dumps(orphan))
    res = _cli("run", "--local", str(root), "--policy", str(policy_path))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "nope" in res.stderr and "Traceback" not in res.stderr
    assert not (root / "traces").exists()  # nothing ran, nothing written
    res = _cli("run", "--local", str(tmp_path / "missing"))
    assert res.returncode == 2 and "definitions/" in res.stderr
    res = _cli("run", "--local", str(root), "--solutions", "ghost", "--policy", str(policy_path))
    assert res.returncode == 2 and "ghost" in res.stderr
    with pytest.raises(InputError, match="duplicate solution"):
        (root / "solutions" / "again.json").write_text(
            (root / "solutions" / "rms_t" / "good.json").read_text())
        load_dataset(root)


def test_trace_file_keeps_whole_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": ')  # a crash mid-line
    assert repair(path) == len(b'{"c": ')
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    assert repair(path) == 0
    path.write_bytes(b'{"no newline at all"')
    assert repair(path) == len(b'{"no newline at all"')
    assert path.read_bytes() == b""
    assert TraceWriter().append(path, []) == 0


def test_static_analysis_runs_once_per_batch_with_the_same_findings(tmp_path: Path,
                                                                    policy_path: Path) -> None:
    root = _dataset(tmp_path / "ds", {"good": GOOD, "shell": SHELL, "wrong": WRONG})
    policy = load_policy(policy_path)
    batched = run_dataset(root, RunOptions(policy=policy, backend="process", seed=3))
    statics = {o.task.solution: o.verdict.stage("static") for o in batched.outcomes if o.verdict}
    assert all(s.details.get("batch") == 3 for s in statics.values())
    from sandboxharness.intake import load_solution
    from sandboxharness.static import run_static

    for name, stage in statics.items():  # the same findings as a candidate analysed alone
        alone = run_static(load_solution(root / "solutions" / "rms_t" / f"{name}.json"), None,
                           policy, tmp_path / "alone")
        got = [(f["rule_id"], f["line"]) for f in stage.details["findings"]]
        assert got == [(f.rule_id, f.line) for f in alone.findings], name
